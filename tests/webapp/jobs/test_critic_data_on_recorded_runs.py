"""The critic-data job on recorded episodes (the imported gpt-4o tau-bench airline run, offline data): no
self-play and no model; first errors from tau-bench's gold actions become intervene targets, the steps before
them approve targets, and a runtime-critic snapshot of the project holds them."""

from __future__ import annotations

import pytest

from webapp.jobs.models import Job, StepCritique
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_labels_the_first_errors_of_an_imported_run_without_a_model(tau_project, personas):
    from webapp.datasets.models import Snapshot

    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True))
    job = lifecycle.check_create_job(personas["researcher"], "critic-data", {"train": False, "approve_ratio": 1.0},
                                     {"trajectory_ids": ids})
    assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
    job.refresh_from_db()
    out = job.outputs
    assert out["recorded"] and out["episodes"] == 200 and out["tasks"]["all"] == 50
    assert out["targets"]["intervene"] == 92  # as `python -m nlac_core first-errors` places them
    assert out["targets"]["approve"] == 92
    assert out["unlocalised_episodes"] == 116 - 92
    labels = StepCritique.objects.filter(job=job, mode="runtime-label")
    assert labels.count() == 184 and {c.trajectory.project_id for c in labels} == {tau_project.pk}
    snapshot = Snapshot.objects.get(pk=out["snapshot"])
    assert snapshot.status == Snapshot.READY and snapshot.n_records >= 184
    assert snapshot.dataset.project_id == tau_project.pk and snapshot.dataset.kind == "runtime_critic"


def test_it_refuses_to_validate_feedback_on_recorded_episodes(tau_project, personas):
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:4])
    job = lifecycle.check_create_job(personas["researcher"], "critic-data",
                                     {"train": False, "validate_feedback": True}, {"trajectory_ids": ids})
    assert execute(job.pk, "w:1") == Job.FAILED
    job.refresh_from_db()
    assert "recorded episodes cannot be re-run" in job.error
