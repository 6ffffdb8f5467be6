"""A train-critic job on a real worker whose host trains on two processes (NLAC_TRAIN_PROCESSES=2, accelerate
launch over gloo): progress streams into the job row, a cancel stops every process, a retry resumes."""

from __future__ import annotations

import pytest

from nlac_core.training.distributed import launched_by
from tests.workers.conftest import wait_for
from webapp.jobs.models import Checkpoint, Job, StepTarget
from webapp.jobs.services import lifecycle

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.heavy, pytest.mark.django_db(transaction=True)]


def _targets(project, researcher, n_trajectories: int) -> list[int]:
    """Bellman targets on every step of the first trajectories (what a backup job writes; the model is beside
    the point here)."""
    from nlac_core.backends.base import Provenance
    from nlac_core.outputs import BellmanTarget, to_json
    from nlac_core.state import steps_of
    from nlac_core.successor import ref_of
    from webapp.trajectories.services.exports import iter_with_ids

    ids = list(project.trajectories.order_by("id").values_list("id", flat=True)[:n_trajectories])
    backup = lifecycle.check_create_job(researcher, "backup", {"steps": "all"}, {"trajectory_ids": ids[:1]})
    prov = Provenance("backup@test", "fake", "fake", {})
    for pk, record in iter_with_ids(project.trajectories.filter(pk__in=ids)):
        for step in steps_of(record):
            target = BellmanTarget(ref_of(step), "the user is helped and thanks the agent", 0.75, False, prov)
            StepTarget.objects.create(trajectory_id=pk, step_index=step.index, job=backup, success_prob=0.75,
                                      prompt_id="backup@test", record=to_json(target))
    return ids


def finished(job: Job):
    job.refresh_from_db()
    return job.status in Job.FINISHED and job


def test_it_trains_on_two_processes_cancels_them_all_and_resumes_on_retry(tau_project, personas, workers):
    proc = workers.start(NLAC_TRAIN_PROCESSES="2")
    ids = _targets(tau_project, personas["researcher"], 2)
    job = lifecycle.check_create_job(personas["researcher"], "train-critic",
                                     {"max_steps": 6, "per_device_batch_size": 1, "max_length": 384,
                                      "max_state_chars": 400, "learning_rate": 1e-4, "name": "critic-2proc"},
                                     {"trajectory_ids": ids})
    wait_for(lambda: Job.objects.get(pk=job.pk).metrics, 600, "the first training step in the job's metrics", 0.5)
    assert len(launched_by(proc.pid)) >= 3  # the launcher and two ranks, started by the worker
    lifecycle.do_request_cancel(job)
    job = wait_for(lambda: finished(job), 300, "the job to stop")
    assert job.status == Job.CANCELLED, job.error + job.traceback
    stopped_at = job.outputs["steps"]
    assert 1 <= stopped_at < 6 and job.outputs["stopped_early"] is True
    assert launched_by(proc.pid) == []  # no training process outlives the cancel
    log = lifecycle.read_log_tail(job.pk)
    assert "accelerate launch: 2 processes x 1 machine(s), ddp" in log

    job = lifecycle.do_retry(job)
    job = wait_for(lambda: finished(job), 600, "the retried job")
    assert job.status == Job.SUCCEEDED, job.error + job.traceback
    trained = Checkpoint.objects.get(pk=job.outputs["checkpoint_produced"])
    assert trained.manifest["metrics"]["processes"] == 2 and trained.manifest["metrics"]["steps"] == 6
    assert trained.manifest["metrics"]["resumed_from_step"] == stopped_at
    assert [m["step"] for m in job.metrics][-1] == 6 and all(m["loss"] > 0 for m in job.metrics)
    assert launched_by(proc.pid) == []
