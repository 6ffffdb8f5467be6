"""The replay-critic job with a runtime critic biased like the base SmolLM2 (approve whatever it reads): raw
likelihood approves every recorded action, the calibrated default intervenes on the ones the critic finds worse
than nothing, and each stored check keeps its probabilities and calibration."""

from __future__ import annotations

import pytest

from tests.nlac_core.test_runtime_critic_calibration import biased_critic
from webapp.jobs import loaded_model
from webapp.jobs.configs import ConfigError
from webapp.jobs.models import Job, StepCritique
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_replays_a_biased_critic_raw_and_calibrated(tau_project, personas):
    loaded_model.override(lambda config, checkpoint: biased_critic("book_reservation"))
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:4])
    try:
        jobs = {}
        for calibrate in (False, True):
            job = lifecycle.check_create_job(personas["researcher"], "replay-critic",
                                             {"calibrate": calibrate, "chunk_size": 64}, {"trajectory_ids": ids})
            assert execute(job.pk, "w:1") == Job.SUCCEEDED
            jobs[calibrate] = StepCritique.objects.filter(job=job)
    finally:
        loaded_model.override(None)
    raw, calibrated = jobs[False], jobs[True]
    assert raw.count() == calibrated.count() > 0
    assert {r.record["decision"] for r in raw} == {"approve"} and {r.record["verdict_calibration"] for r in raw} == {""}
    stopped = {(r.trajectory_id, r.step_index) for r in calibrated if r.record["decision"] == "intervene"}
    booked = {(r.trajectory_id, r.step_index) for r in calibrated if "book_reservation" in r.record["action"]}
    assert stopped == booked and stopped  # exactly the actions the critic rates worse than nothing
    for r in calibrated:
        assert r.record["verdict_calibration"] == "content_free"
        assert set(r.record["verdict_probs"]) == {"approve", "intervene"}


def test_it_refuses_a_calibrate_setting_that_is_not_a_boolean(personas):
    with pytest.raises(ConfigError) as caught:
        lifecycle.check_create_job(personas["researcher"], "replay-critic", {"calibrate": "yes"},
                                   {"trajectory_ids": [1]})
    assert caught.value.field == "calibrate"
