"""A real tau-bench trajectory with model critiques on its first steps, and a queue helper."""

from __future__ import annotations

import pytest

from webapp.jobs.models import Job, StepCritique


@pytest.fixture
def project(db):
    """The grok-3 tau2-bench airline run (20 simulations): small enough to import in every test."""
    from tests.conftest import TAU2_GROK, imported
    return imported("tau2-bench airline", TAU2_GROK)


@pytest.fixture
def trajectory(project):
    """A failed airline trajectory with at least four agent steps."""
    return project.trajectories.filter(success=False, n_steps__gte=4).order_by("id").first()


def add_critique(trajectory, step_index: int, verdict: str = "suboptimal", *, success_prob: float = 0.7,
                 parse_ok: bool = True, future: str = "the user confirms and the booking is changed",
                 job: Job | None = None) -> StepCritique:
    job = job or Job.objects.create(kind="critique", status=Job.SUCCEEDED, config={})
    return StepCritique.objects.create(
        trajectory=trajectory, step_index=step_index, job=job, verdict=verdict, success_prob=success_prob,
        parse_ok=parse_ok, prompt_id="evaluator@abcd1234", mode="sectioned",
        record={"predicted_future": future, "reasoning": "it did not check the fare rules",
                "suggestion": "look up the reservation first", "raw_text": "FUTURE: ...",
                "provenance": {"model": "smollm2", "sampling": {"temperature": 0.0}}})


@pytest.fixture
def critiques(trajectory):
    """Critiques of steps 0, 1 and 2 (one each)."""
    job = Job.objects.create(kind="critique", status=Job.SUCCEEDED, config={})
    return [add_critique(trajectory, i, ("optimal", "suboptimal", "harmful")[i], job=job) for i in range(3)]


def fields(**changes) -> dict:
    base = {"predicted_future": "the agent cancels the wrong flight", "predicted_outcome": "failure",
            "verdict": "harmful", "reasoning": "it never asked for confirmation", "suggestion": "ask the user"}
    return {**base, **changes}
