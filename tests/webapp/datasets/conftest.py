"""Real stored steps with every kind of target a dataset draws on: model critiques, Bellman targets and
refinements (as the jobs write them: full nlac_core records), and human revisions, submitted or accepted."""

from __future__ import annotations

import pytest

from nlac_core.backends.base import Provenance
from nlac_core.outputs import BellmanTarget, Critique, Future, Refinement, to_json
from nlac_core.successor import ref_of
from webapp.jobs.models import Job, StepCritique, StepRefinement, StepTarget

PROV = Provenance(prompt_id="evaluator@test0001", backend="hf", model="smollm2", sampling={"temperature": 0.0})


@pytest.fixture
def project(db):
    """The grok-3 tau2-bench airline run (20 simulations)."""
    from tests.conftest import TAU2_GROK, imported
    return imported("tau2-bench airline", TAU2_GROK)


@pytest.fixture
def trajectory(project):
    return project.trajectories.filter(success=False, n_steps__gte=5).order_by("id").first()


def step_view(trajectory, index: int):
    from nlac_core.state import step_of
    from webapp.trajectories.convert import trajectory_record

    return step_of(trajectory_record(trajectory, trajectory.messages.all()), index)


def job(kind: str) -> Job:
    return Job.objects.create(kind=kind, status=Job.SUCCEEDED, config={})


def add_critique(trajectory, index: int, verdict: str = "suboptimal", success_prob: float = 0.7,
                 job_row: Job | None = None) -> StepCritique:
    ref = ref_of(step_view(trajectory, index))
    c = Critique(step=ref, predicted_future=f"model future {index}", success_prob=success_prob, verdict=verdict,
                 reasoning=f"model reason {index}", suggestion=f"model suggestion {index}", raw_text="", parse_ok=True,
                 provenance=PROV, futures=(Future(ref, f"model future {index}", success_prob, PROV),))
    return StepCritique.objects.create(trajectory=trajectory, step_index=index, job=job_row or job("critique"),
                                       verdict=verdict, success_prob=success_prob, parse_ok=True,
                                       prompt_id=PROV.prompt_id, mode="sectioned", record=to_json(c))


def add_target(trajectory, index: int, text: str = "", job_row: Job | None = None) -> StepTarget:
    ref = ref_of(step_view(trajectory, index))
    t = BellmanTarget(step=ref, text=text or f"bellman future {index}", success_prob=0.2, terminal=False,
                      provenance=Provenance(prompt_id="backup@test0002", backend="hf", model="smollm2"))
    return StepTarget.objects.create(trajectory=trajectory, step_index=index, job=job_row or job("backup"),
                                     success_prob=0.2, prompt_id="backup@test0002", record=to_json(t))


def add_refinement(trajectory, index: int, action: str, critique: StepCritique | None = None,
                   job_row: Job | None = None) -> StepRefinement:
    ref = ref_of(step_view(trajectory, index))
    r = Refinement(step=ref, original_action="the original", refined_action=action, valid=True, error="", rounds=1,
                   critique_text="", provenance=Provenance(prompt_id="refine@test0003", backend="hf", model="smollm2"))
    return StepRefinement.objects.create(trajectory=trajectory, step_index=index, job=job_row or job("refine"),
                                         critique=critique, valid=True, changed=True, prompt_id="refine@test0003",
                                         record=to_json(r))


def correct(user, trajectory, index: int, critique=None, accept_by=None, **changes):
    """A human correction of a step (of its critique when given), accepted by ``accept_by`` when given."""
    from webapp.annotation.services.reviews import do_review
    from webapp.annotation.services.revisions import Target, do_save_revision, find_annotation

    target = Target(trajectory, index, critique)
    existing = find_annotation(target, user)
    fields = {"predicted_future": f"human future {index}", "predicted_outcome": "failure", "verdict": "harmful",
              "reasoning": f"human reason {index}", "suggestion": f"human suggestion {index}", **changes}
    revision = do_save_revision(user, target, fields, existing.head_id if existing else None, annotation=existing)
    if accept_by is not None:
        do_review(accept_by, revision.annotation, revision.pk, "accept")
    return revision


def make_dataset(project, kind: str = "critic_targets", name: str = "", **spec):
    from webapp.datasets.services.datasets import check_create_dataset

    return check_create_dataset(None, name or f"{kind} set", kind, project, spec)


def build(dataset, user=None):
    from webapp.datasets.services.build import do_build_snapshot, do_create_snapshot

    return do_build_snapshot(do_create_snapshot(dataset, user))


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    """Enqueued job ids are captured instead of sent (the broker is beside the point here)."""
    from django.db import transaction

    from webapp.jobs.services import lifecycle

    ids: list[int] = []
    monkeypatch.setattr(lifecycle, "enqueue", lambda job: transaction.on_commit(lambda: ids.append(job.pk)))
    return ids


@pytest.fixture
def gold_set(project, personas):
    """Gold corrections of the first three steps of six failed trajectories, and Bellman targets on the
    fourth: a critic-targets dataset built from it holds 18 gold and 6 Bellman records."""
    trajectories = list(project.trajectories.filter(n_steps__gte=4).order_by("id")[:6])
    for i, t in enumerate(trajectories):
        for index in range(3):
            c = add_critique(t, index, ("optimal", "suboptimal", "harmful")[(i + index) % 3])
            correct(personas["annotator"], t, index, c, accept_by=personas["reviewer"],
                    verdict=("harmful", "optimal", "suboptimal")[(i + index) % 3])
        add_target(t, 3)
    return trajectories
