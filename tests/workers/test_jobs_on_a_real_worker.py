"""Jobs through Redis and real worker processes, with the real embedded model where it does the work.

The SIGKILL test is the promise of the Jobs design: kill a worker in the middle
of a multi-chunk job, start another, let the reaper re-queue the job when its
lease runs out, and the job finishes with exactly one result per item.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.workers.conftest import wait_for
from webapp.jobs.models import Job, StepCritique
from webapp.jobs.services import lifecycle
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def status_of(job: Job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def finished(job: Job):
    job.refresh_from_db()
    return job.status in Job.FINISHED and job


def critique_job(project, user, n: int, **config) -> Job:
    ids = list(project.trajectories.order_by("id").values_list("id", flat=True)[:n])
    return lifecycle.check_create_job(user, "critique", {"steps": "first", "chunk_size": 1, "max_state_chars": 800,
                                                         **config}, {"trajectory_ids": ids})


def test_it_critiques_three_real_steps_with_the_embedded_model(tau_project, personas, worker):
    job = critique_job(tau_project, personas["researcher"], 3)
    job = wait_for(lambda: finished(job), 300, "the critique job")
    assert job.status == Job.SUCCEEDED, job.error + job.traceback
    rows = list(StepCritique.objects.filter(job=job))
    assert len(rows) == 3 and {r.trajectory_id for r in rows} == set(job.selection["trajectory_ids"])
    assert all(r.parse_ok and r.verdict in ("optimal", "suboptimal", "harmful") for r in rows)
    assert all(r.record["provenance"]["backend"] == "hf" and r.record["predicted_future"] for r in rows)
    assert job.checkpoint.name == "smollm2-135m-instruct" and job.worker.split(":")[1] != str(os.getpid())
    assert job.outputs["critiques"] == 3 and job.progress_done == job.progress_total == 3


def test_it_finishes_a_job_whose_worker_was_killed_with_one_result_per_step(tau_project, personas, workers):
    first = workers.start()
    job = critique_job(tau_project, personas["researcher"], 6)
    wait_for(lambda: StepCritique.objects.filter(job=job).count() >= 1, 300, "the first committed chunk")
    workers.kill(first)
    killed_at = time.monotonic()
    done_before = StepCritique.objects.filter(job=job).count()
    assert status_of(job) == Job.RUNNING and done_before < 6
    workers.start()
    # the reaper (beat, or manage.py reap_jobs --loop, in production) re-queues the job once its lease ran out
    wait_for(lambda: lifecycle.do_reap() or None, 60, "the lease to expire and the reaper to re-queue the job",
             every=0.5)
    wait_for(lambda: Job.objects.filter(pk=job.pk, status=Job.RUNNING, attempts=2).exists(), 120,
             "the new worker to claim the job")
    back_after = time.monotonic() - killed_at
    job = wait_for(lambda: finished(job), 300, "the job to finish")
    assert job.status == Job.SUCCEEDED, job.error
    rows = StepCritique.objects.filter(job=job)
    assert rows.count() == 6 and len(set(rows.values_list("trajectory_id", "step_index"))) == 6
    assert job.attempts == 2 and "re-queued by the reaper" in lifecycle.read_log_tail(job.pk)
    assert back_after < workers.lease_s + 30
    print(f"\nkilled with {done_before}/6 steps done; running again {back_after:.1f} s after SIGKILL "
          f"(lease {workers.lease_s} s)")


def test_it_cancels_a_running_job_between_chunks(tau_project, personas, worker):
    job = critique_job(tau_project, personas["researcher"], 8)
    wait_for(lambda: StepCritique.objects.filter(job=job).count() >= 1, 300, "the first committed chunk")
    lifecycle.do_request_cancel(job)
    job = wait_for(lambda: finished(job), 120, "the job to stop")
    assert job.status == Job.CANCELLED
    kept = StepCritique.objects.filter(job=job).count()
    assert 1 <= kept < 8 and job.outputs["critiques"] == kept


def test_it_shows_the_error_of_a_job_that_failed_on_the_worker(tau_project, personas, worker):
    from webapp.jobs.models import Checkpoint

    broken = Checkpoint.objects.create(name="gone", path="/nowhere/gone-model")
    job = critique_job(tau_project, personas["researcher"], 1, checkpoint=broken.pk)
    job = wait_for(lambda: finished(job), 120, "the job to fail")
    assert job.status == Job.FAILED
    assert "/nowhere/gone-model" in job.error and "Traceback" in job.traceback


def test_it_rolls_out_twenty_questions_and_stores_the_games(personas, worker):
    job = lifecycle.check_create_job(personas["researcher"], "rollout",
                                     {"env": "twenty_questions", "tasks": 2, "trials": 1, "max_turns": 3,
                                      "max_new_tokens": 16, "project": "20Q rollouts (test)"})
    job = wait_for(lambda: finished(job), 300, "the rollout job")
    assert job.status == Job.SUCCEEDED, job.error + job.traceback
    games = Trajectory.objects.filter(project__name="20Q rollouts (test)")
    assert games.count() == 2 and job.outputs["trajectories"] == 2
    assert all(t.meta["job"] == job.pk and t.source_checkpoint == job.checkpoint.path for t in games)
    assert all(1 <= t.n_steps <= 3 for t in games) and len(job.metrics) == 2


@pytest.mark.heavy
def test_it_trains_a_critic_for_two_steps_and_critiques_with_the_new_checkpoint(tau_project, personas, worker,
                                                                                 settings, tmp_path):
    from webapp.jobs.models import Checkpoint, StepTarget

    researcher = personas["researcher"]
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    backup = lifecycle.check_create_job(researcher, "backup", {"steps": "-2,-1", "next_action": "data",
                                                               "max_state_chars": 600}, {"trajectory_ids": ids})
    backup = wait_for(lambda: finished(backup), 300, "the backup job")
    assert backup.status == Job.SUCCEEDED, backup.error + backup.traceback
    assert StepTarget.objects.filter(job=backup).count() == 4
    train = lifecycle.check_create_job(researcher, "train-critic",
                                       {"max_steps": 2, "per_device_batch_size": 2, "max_length": 768,
                                        "max_state_chars": 600, "learning_rate": 1e-4, "name": "critic-test"},
                                       {"trajectory_ids": ids})
    train = wait_for(lambda: finished(train), 600, "the train-critic job")
    assert train.status == Job.SUCCEEDED, train.error + train.traceback
    trained = Checkpoint.objects.get(pk=train.outputs["checkpoint_produced"])
    assert trained.name == "critic-test" and trained.produced_by == train and trained.kind == "critic"
    assert trained.parent.name == "smollm2-135m-instruct" and trained.size_bytes > 100_000_000
    assert trained.manifest["dataset_hash"] and [p["step"] for p in train.metrics] == [1, 2]
    assert all(p["loss"] > 0 for p in train.metrics)
    critique = critique_job(tau_project, researcher, 1, checkpoint=trained.pk)
    critique = wait_for(lambda: finished(critique), 300, "a critique job on the new checkpoint")
    assert critique.status == Job.SUCCEEDED, critique.error + critique.traceback
    row = StepCritique.objects.get(job=critique)
    assert row.checkpoint == trained and row.record["provenance"]["model"] == trained.path


@pytest.mark.heavy
def test_it_runs_a_whole_nlac_iteration_as_child_jobs_on_a_real_worker(personas, worker):
    from webapp.jobs.models import Checkpoint

    parent = lifecycle.check_create_job(personas["researcher"], "nlac-iteration", {
        "env": "twenty_questions", "tasks": 1, "trials": 1, "max_turns": 2, "max_steps": 1, "max_length": 768,
        "max_state_chars": 500, "tau": 0.5, "project": "NLAC iteration (test)"})
    parent = wait_for(lambda: finished(parent), 600, "the iteration")
    assert parent.status == Job.SUCCEEDED, parent.error + parent.traceback
    kinds = list(parent.children.order_by("id").values_list("kind", "status"))
    assert kinds == [(k, Job.SUCCEEDED) for k in ("rollout", "backup", "critique", "refine", "train-critic")]
    trained = Checkpoint.objects.get(pk=parent.outputs["checkpoint_produced"])
    twin = Checkpoint.objects.get(pk=parent.outputs["ema_target"])
    assert trained.kind == "policy+critic" and twin.ema_of == trained and twin.kind == "ema"
    assert twin.manifest["tau"] == 0.5 and twin.manifest["ema_updates"] == 1  # from a copy of the online model


def test_it_builds_and_exports_a_dataset_snapshot_on_a_real_worker(tau_project, personas, worker, client_for):
    """The build and the export go through Redis to a worker process; the download serves what it wrote."""
    from webapp.datasets.models import Export, Snapshot
    from webapp.datasets.services.datasets import check_create_dataset, check_start_export, do_start_build

    dataset = check_create_dataset(personas["researcher"], "worker trajectories", "trajectories", tau_project,
                                   {"filter": {"outcome": "failed"}})
    snapshot, job = do_start_build(personas["researcher"], dataset)
    job = wait_for(lambda: finished(job), 120, "the build job")
    assert job.status == Job.SUCCEEDED, job.error + job.traceback
    snapshot.refresh_from_db()
    failed = tau_project.trajectories.filter(success=False).count()
    assert snapshot.status == Snapshot.READY and snapshot.n_records == failed
    export, job = check_start_export(personas["researcher"], snapshot, "tau-bench")
    job = wait_for(lambda: finished(job), 120, "the export job")
    assert job.status == Job.SUCCEEDED, job.error + job.traceback
    export.refresh_from_db()
    assert export.status == Export.READY and export.n_records == failed
    response = client_for("researcher").get(f"/exports/{export.pk}/download/")
    import json
    assert len(json.loads(b"".join(response.streaming_content))) == failed


@pytest.mark.heavy
def test_it_trains_a_runtime_critic_from_the_pipeline_and_supervises_with_it_on_a_real_worker(personas, worker,
                                                                                             monkeypatch):
    """The critic's data pipeline to a checkpoint that supervises. SmolLM2-135M never writes a tool call on the
    tool-use env, so no gold action can place its errors: the self-play here is a scripted actor (in this
    process, the job not sent to the broker), whose wrong call gives the targets; the snapshot's train-critic
    child job goes through Redis to the worker and trains the embedded model for real, and the checkpoint
    then checks the embedded actor's proposals in a supervised rollout on the worker."""
    from nlac_core.backends.fake import FakeBackend
    from tests.webapp.jobs.test_supervised_jobs import self_player
    from webapp.datasets.models import Snapshot
    from webapp.jobs import loaded_model
    from webapp.jobs.models import Checkpoint
    from webapp.jobs.runners.base import execute

    researcher = personas["researcher"]
    broker = lifecycle.enqueue
    monkeypatch.setattr(lifecycle, "enqueue", lambda job: None)  # this one runs here, with the scripted actor
    data = lifecycle.check_create_job(researcher, "critic-data", {
        "split": "all", "tasks": 4, "k": 2, "max_turns": 3, "approve_ratio": 1.0, "train": True,
        "train_max_steps": 1, "learning_rate": 1e-4, "project": "critic data (worker test)"})
    monkeypatch.setattr(lifecycle, "enqueue", broker)  # its child goes to the worker
    loaded_model.override(lambda config, checkpoint: FakeBackend(model="self-player", responder=self_player))
    try:
        assert execute(data.pk, "test:1") == Job.SUCCEEDED
    finally:
        loaded_model.override(None)
    data.refresh_from_db()
    out = data.outputs
    snapshot = Snapshot.objects.get(pk=out["snapshot"])
    assert snapshot.status == Snapshot.READY and snapshot.dataset.kind == "runtime_critic"
    assert snapshot.n_records == out["targets"]["stored"] > 0
    train = Job.objects.get(pk=out["train_job"])
    assert train.parent == data and train.config["snapshot"] == snapshot.pk
    train = wait_for(lambda: finished(train), 600, "the train-critic child job on the worker")
    assert train.status == Job.SUCCEEDED, train.error + train.traceback
    assert train.worker.split(":")[1] != str(os.getpid())
    critic = Checkpoint.objects.get(pk=train.outputs["checkpoint_produced"])
    assert critic.produced_by == train and critic.parent.name == "smollm2-135m-instruct"
    assert critic.manifest["dataset_hash"]

    supervised = lifecycle.check_create_job(researcher, "supervised-rollout", {
        "env": "tool_use", "split": "synthetic_test", "tasks": 1, "trials": 1, "max_turns": 2,
        "max_new_tokens": 48, "critic_checkpoint": critic.pk, "max_rounds": 1, "max_interventions": 1,
        "feedback_tokens": 16, "both_arms": False, "counterfactuals": False, "project": "supervised (worker test)"})
    supervised = wait_for(lambda: finished(supervised), 600, "the supervised rollout with the trained critic")
    assert supervised.status == Job.SUCCEEDED, supervised.error + supervised.traceback
    assert supervised.outputs["critic_checkpoint"] == critic.pk and supervised.outputs["episodes"]["supervised"] == 1
    (episode,) = Trajectory.objects.filter(meta__job=supervised.pk)
    checks = [c for m in episode.messages.filter(role="assistant") for c in m.meta.get("supervision", [])]
    decided = [c for c in checks if c["decision"] in ("approve", "intervene")]
    assert decided and all(c["critic_model"] == critic.path for c in decided)
    assert StepCritique.objects.filter(job=supervised, mode="runtime", checkpoint=critic).count() == len(decided)


def test_it_runs_shards_on_two_workers_and_survives_one_killed_mid_shard(tau_project, personas, workers):
    """A critique job in two shards on two real workers: each takes a shard; the worker of one is SIGKILLed after
    its first committed chunk; a new worker and the reaper finish it; one result per step over the shards."""
    a, b = workers.start(), workers.start()
    job = critique_job(tau_project, personas["researcher"], 6, shards=2)
    shards = wait_for(lambda: list(job.children.order_by("id")) if job.children.count() == 2 else None, 120,
                      "the parent to start its shards")
    running = wait_for(lambda: (lambda rows: rows if len(rows) == 2 else None)(
        list(Job.objects.filter(parent=job, status=Job.RUNNING))), 300, "both shards running at once")
    assert len({r.worker for r in running}) == 2  # each worker took a shard
    victim = wait_for(lambda: next((s for s in shards if StepCritique.objects.filter(job=s).exists()), None), 300,
                      "a shard's first committed chunk")
    victim.refresh_from_db()
    assert victim.status == Job.RUNNING
    workers.kill(a if victim.worker.rsplit(":", 1)[1] == str(a.pid) else b)  # worker names end with the pid
    workers.start()
    wait_for(lambda: lifecycle.do_reap() or None, 60, "the reaper to re-queue the killed shard", every=0.5)
    job = wait_for(lambda: finished(job), 600, "the sharded job to finish")
    assert job.status == Job.SUCCEEDED, job.error
    rows = StepCritique.objects.filter(job__in=[s.pk for s in shards])
    assert rows.count() == 6 and len(set(rows.values_list("trajectory_id", "step_index"))) == 6
    victim.refresh_from_db()
    assert victim.attempts == 2 and victim.status == Job.SUCCEEDED
    assert job.outputs["critiques"] == 6 and job.outputs["shards"] == [s.pk for s in shards]
