"""evaluate-critic reports what its P(success) is worth on the held-out steps: AUROC of won vs lost episodes'
steps with a by-task interval, the base rate's Brier score, and a flag for a successor that says "success"
everywhere (shown on the comparison page, not hidden)."""

from __future__ import annotations

import pytest

from nlac_core.backends.fake import FakeBackend
from tests.webapp.datasets.conftest import build, make_dataset
from webapp.jobs import loaded_model
from webapp.jobs.models import Job
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)


def says_success(request) -> float:
    """A successor that finds "success" far likelier than "failure" whatever it reads (as SmolLM2 does)."""
    return {"success": 0.0, "failure": -3.0}.get(request.continuation.strip(), -1.0)


def test_it_flags_a_successor_that_says_success_everywhere(project, gold_set, personas, client_for):
    from webapp.trajectories.models import Trajectory

    snapshot = build(make_dataset(project, name="outcome check", fractions=[0.5, 0, 0.5]))
    # which tasks land in the test split depends on their hashes: make every held-out episode a lost one, so
    # what the successor should have said is known (a success rate of 0)
    held = snapshot.records.filter(split="test").values_list("trajectory_id", flat=True)
    Trajectory.objects.filter(pk__in=held).update(success=False)
    loaded_model.override(lambda config, checkpoint: FakeBackend(responder=lambda r: " the user agrees.",
                                                                 scorer=says_success))
    try:
        job = lifecycle.check_create_job(personas["researcher"], "evaluate-critic", {
            "snapshot": snapshot.pk, "split": "test", "max_steps": 50, "chunk_size": 50})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
    finally:
        loaded_model.override(None)
    job.refresh_from_db()
    outcome = job.outputs["outcome"]
    n = job.outputs["evaluated"]
    assert outcome["n"] == n > 0 and outcome["share_predicted_success"] == 1.0
    assert outcome["success_rate"] == 0.0
    assert outcome["flags"][0] == "says success everywhere: 100% of steps predicted success, 0% of them succeeded"
    assert outcome["brier"] > outcome["base_rate_brier"]
    page = client_for("researcher").get(f"/checkpoints/compare/?id={job.checkpoint_id}").content.decode()
    assert "says success everywhere" in page and "P(success) AUROC" in page
