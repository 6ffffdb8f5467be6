"""The calibrate-outcome job fits the checkpoint's P(success) to the selected episodes' real outcomes (held-out
report, raw and calibrated) and stores the calibration on the checkpoint; the checkpoint's later critique jobs
map P(success) through it, keep the raw value, and say which calibration they used."""

from __future__ import annotations

import pytest

from nlac_core.backends.fake import FakeBackend
from webapp.jobs import loaded_model
from webapp.jobs.configs import ConfigError
from webapp.jobs.models import Job, StepCritique
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle
from webapp.jobs.services.checkpoints import checkpoint_for

pytestmark = pytest.mark.django_db(transaction=True)


def says_success(request) -> float:
    return {"success": 0.0, "failure": -3.0}.get(request.continuation.strip(), -1.0)


def test_it_fits_stores_and_applies_an_outcome_calibration(tau_project, personas):
    researcher = personas["researcher"]
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:40])
    loaded_model.override(lambda config, checkpoint: FakeBackend(responder=lambda r: " the user agrees.",
                                                                 scorer=says_success))
    try:
        job = lifecycle.check_create_job(researcher, "calibrate-outcome", {"steps": "1,-2", "chunk_size": 40},
                                         {"trajectory_ids": ids})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
        job.refresh_from_db()
        raw, calibrated = job.outputs["held_out"]["raw"], job.outputs["held_out"]["calibrated"]
        assert raw["share_predicted_success"] == 1.0 and raw["flags"][0].startswith("says success everywhere")
        assert calibrated["mean_predicted"] < 0.8 and calibrated["brier"] < raw["brier"]
        checkpoint = checkpoint_for(None)
        stored = checkpoint.manifest["outcome_calibration"]
        assert stored["id"] == job.outputs["calibration"]["id"] and stored["job"] == job.pk

        critiques = {}
        for flag in (True, False):
            run = lifecycle.check_create_job(researcher, "critique", {"steps": "first", "calibrate_outcome": flag},
                                             {"trajectory_ids": ids[:3]})
            assert execute(run.pk, "w:1") == Job.SUCCEEDED
            run.refresh_from_db()
            critiques[flag] = (run, list(StepCritique.objects.filter(job=run).order_by("id")))
    finally:
        loaded_model.override(None)
    run, rows = critiques[True]
    assert run.outputs["outcome_calibration"] == stored["id"]
    for row, plain in zip(rows, critiques[False][1], strict=True):
        future = row.record["futures"][0]
        assert future["outcome_calibration"] == stored["id"]
        assert future["success_prob_raw"] == pytest.approx(plain.success_prob)
        assert row.success_prob == pytest.approx(calibrated_prob(stored, plain.success_prob))
    assert critiques[False][0].outputs["outcome_calibration"] is None


def calibrated_prob(stored, prob):
    from nlac_core.outcome import OutcomeCalibration

    return OutcomeCalibration.from_dict(stored).apply(prob)


def test_it_refuses_an_endpoint_successor(personas):
    with pytest.raises(ConfigError) as caught:
        lifecycle.check_create_job(personas["researcher"], "calibrate-outcome",
                                   {"backend": "openai", "endpoint_model": "m", "endpoint": "x"},
                                   {"trajectory_ids": [1]})
    assert caught.value.field in ("backend", "endpoint")
