"""Building a queue from a filter over steps. The membership is frozen at creation."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, Subquery

from webapp.annotation.models import Queue, QueueItem
from webapp.annotation.services import audit
from webapp.errors import FieldError
from webapp.jobs.models import StepCritique
from webapp.trajectories.models import Message, Project

MAX_ITEMS = 20_000
OUTCOMES = ("any", "failed", "succeeded")
DISAGREEMENTS = ("any", "either", "predicted_success_failed", "predicted_failure_succeeded")
QueueError = FieldError  # this app's name for the one field error (webapp.errors)


@dataclass(frozen=True)
class QueueSpec:
    """Which steps a queue holds. Every condition narrows; the defaults take every step of the project."""

    outcome: str = "any"  # of the trajectory: "failed" = success is false
    min_reward: float | None = None
    max_reward: float | None = None
    verdict: str = ""  # the critic's verdict on the step
    parse_failures: bool = False  # only steps whose critique broke the format
    disagreement: str = "any"  # critic predicted success but the episode failed, or the reverse
    no_critique: bool = False  # only steps no model has critiqued yet
    sample: int | None = None  # a random sample of N of the matching steps
    seed: int = 0
    source_model: str = ""
    extra: dict = field(default_factory=dict)

    def validate(self) -> None:
        if self.outcome not in OUTCOMES:
            raise QueueError("outcome", f"one of {', '.join(OUTCOMES)}")
        if self.disagreement not in DISAGREEMENTS:
            raise QueueError("disagreement", f"one of {', '.join(DISAGREEMENTS)}")
        if self.no_critique and (self.verdict or self.parse_failures or self.disagreement != "any"):
            raise QueueError("no_critique", "steps with no critique have no verdict, format or prediction to filter on")
        if self.sample is not None and not 1 <= self.sample <= MAX_ITEMS:
            raise QueueError("sample", f"between 1 and {MAX_ITEMS}")
        if self.min_reward is not None and self.max_reward is not None and self.min_reward > self.max_reward:
            raise QueueError("min_reward", "is above max_reward")


def _critiques(spec: QueueSpec):
    """The critiques of the outer step that satisfy the spec's critique conditions."""
    query = StepCritique.objects.filter(trajectory=OuterRef("trajectory"), step_index=OuterRef("step_index"))
    if spec.verdict:
        query = query.filter(verdict=spec.verdict)
    if spec.parse_failures:
        query = query.filter(parse_ok=False)
    said_success, said_failure = Q(success_prob__gte=0.5), Q(success_prob__lt=0.5)
    failed, succeeded = Q(trajectory__success=False), Q(trajectory__success=True)
    if spec.disagreement == "predicted_success_failed":
        query = query.filter(said_success & failed)
    elif spec.disagreement == "predicted_failure_succeeded":
        query = query.filter(said_failure & succeeded)
    elif spec.disagreement == "either":
        query = query.filter((said_success & failed) | (said_failure & succeeded))
    return query.order_by("-id")


def _filtered_steps(project: Project, spec: QueueSpec):
    """The project's agent steps (Message rows) that satisfy the spec, before sampling."""
    steps = Message.objects.filter(trajectory__project=project, step_index__isnull=False)
    if spec.outcome == "failed":
        steps = steps.filter(trajectory__success=False)
    elif spec.outcome == "succeeded":
        steps = steps.filter(trajectory__success=True)
    if spec.min_reward is not None:
        steps = steps.filter(trajectory__reward__gte=spec.min_reward)
    if spec.max_reward is not None:
        steps = steps.filter(trajectory__reward__lte=spec.max_reward)
    if spec.source_model:
        steps = steps.filter(trajectory__source_model=spec.source_model)
    any_critique = StepCritique.objects.filter(trajectory=OuterRef("trajectory"), step_index=OuterRef("step_index"))
    if spec.no_critique:
        steps = steps.filter(~Exists(any_critique))
    elif spec.verdict or spec.parse_failures or spec.disagreement != "any":
        steps = steps.filter(Exists(_critiques(spec)))
    return steps


def step_pairs(project: Project, spec: QueueSpec) -> list[tuple[int, int]]:
    """(trajectory id, step index) of every matching step, in trajectory order, sampled; no cap (datasets)."""
    found = list(_filtered_steps(project, spec).order_by("trajectory_id", "step_index")
                 .values_list("trajectory_id", "step_index"))
    if spec.sample is not None and spec.sample < len(found):
        found = sorted(random.Random(spec.seed).sample(found, spec.sample))
    return found


def matching_steps(project: Project, spec: QueueSpec) -> list[tuple[int, int, int | None]]:
    """(trajectory id, step index, critique id to show) of every matching step, in trajectory order."""
    steps = _filtered_steps(project, spec)
    if spec.no_critique:
        rows = steps.values_list("trajectory_id", "step_index")
        found = [(t, s, None) for t, s in rows.order_by("trajectory_id", "step_index")[:MAX_ITEMS * 5]]
    else:
        steps = steps.annotate(critique_id=Subquery(_critiques(spec).values("pk")[:1]))
        found = list(steps.order_by("trajectory_id", "step_index")
                     .values_list("trajectory_id", "step_index", "critique_id")[:MAX_ITEMS * 5])
    if spec.sample is not None and spec.sample < len(found):
        found = sorted(random.Random(spec.seed).sample(found, spec.sample))
    return found[:MAX_ITEMS]


def check_create_queue(actor, name: str, project: Project, spec: QueueSpec, overlap: int, assignees,
                       *, lease_s: int = 600, instructions: str = "") -> Queue:
    spec.validate()
    if not name.strip():
        raise QueueError("name", "a queue needs a name")
    if not 1 <= overlap <= 20:
        raise QueueError("overlap", "between 1 and 20 annotators per item")
    assignees = list(assignees)
    if not assignees:
        raise QueueError("assignees", "choose at least one annotator")
    if overlap > len(assignees):
        raise QueueError("overlap", f"{overlap} annotators per item, but only {len(assignees)} assigned")
    steps = matching_steps(project, spec)
    if not steps:
        raise QueueError("filter", "no step of this project matches")
    return do_create_queue(actor, name.strip(), project, spec, overlap, assignees, steps, lease_s, instructions)


@transaction.atomic
def do_create_queue(actor, name, project, spec, overlap, assignees, steps, lease_s, instructions) -> Queue:
    queue = Queue.objects.create(name=name, project=project, spec=asdict(spec), overlap=overlap, lease_s=lease_s,
                                 instructions=instructions, n_items=len(steps), created_by=actor)
    queue.assignees.set(assignees)
    QueueItem.objects.bulk_create(
        [QueueItem(queue=queue, position=i, trajectory_id=t, step_index=s, critique_id=c)
         for i, (t, s, c) in enumerate(steps)], batch_size=2000)
    audit.record(actor, "queue.create", queue, after={"name": name, "items": len(steps), "overlap": overlap,
                                                       "assignees": [u.username for u in assignees],
                                                       "spec": asdict(spec)})
    return queue
