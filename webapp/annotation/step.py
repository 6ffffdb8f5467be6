"""What the step page shows, computed once: the conversation before the step, the action, what
actually happened next, every critique / Bellman target / refinement of the step with its
provenance and the human annotations on it, the verdict strip of the whole trajectory, and the
editor's starting point (the user's draft, else their latest revision, else the model's critique)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Prefetch, Q

from nlac_core.actions import parse_tool_action
from webapp.annotation.access import annotates_anywhere
from webapp.annotation.diff import field_diffs
from webapp.annotation.models import FIELDS, TEXT_FIELDS, Annotation, Revision
from webapp.annotation.services.drafts import draft_for
from webapp.annotation.services.revisions import Target, draft_key, find_annotation, model_fields
from webapp.jobs.models import StepCritique
from webapp.trajectories import detail
from webapp.trajectories.access import visible_step_indices
from webapp.trajectories.models import Trajectory

DIFF_FIELDS = ("predicted_future", "predicted_outcome", "verdict", "reasoning", "suggestion", "refined_content",
               "refined_tool_calls", "rating", "comment", "skip_reason")


@dataclass
class CritiqueView:
    critique: StepCritique
    annotations: list[Annotation] = field(default_factory=list)

    @property
    def record(self) -> dict:
        return self.critique.record or {}


@dataclass
class StripCell:
    step_index: int
    model: str
    human: str
    current: bool
    readable: bool = True  # a link to the step page (an annotator opens only their queues' steps)

    @property
    def disagree(self) -> bool:
        return bool(self.model and self.human and self.model != self.human)


def editor_values(fields: dict) -> dict[str, Any]:
    """Revision fields as the form shows them (tool calls as pretty JSON text)."""
    values = dict(fields)
    calls = values.get("refined_tool_calls")
    if isinstance(calls, list):
        values["refined_tool_calls"] = json.dumps(calls, indent=2, ensure_ascii=False) if calls else ""
    return values


def verdict_strip(trajectory: Trajectory, current: int, steps: list[int], only_author=None) -> list[StripCell]:
    model: dict[int, str] = {}
    for step, verdict in trajectory.critiques.order_by("step_index", "id").values_list("step_index", "verdict"):
        model[step] = verdict or model.get(step, "")
    human: dict[int, str] = {}
    heads = (Revision.objects.filter(annotation__trajectory=trajectory, annotation__deleted_at=None,
                                     annotation__head_id__isnull=False)
             .filter(pk__in=Annotation.objects.filter(trajectory=trajectory).values("head_id")))
    if only_author is not None:
        heads = heads.filter(annotation__author=only_author)
    heads = (heads
             .order_by("id").values_list("annotation__step_index", "verdict"))
    for step, verdict in heads:
        if verdict:
            human[step] = verdict
    return [StripCell(s, model.get(s, ""), human.get(s, ""), s == current) for s in steps]


def context(user, trajectory: Trajectory, step_index: int, *, critique_id: int | None = None,
            annotation: Annotation | None = None, queue_item=None) -> dict[str, Any]:
    base = detail.context(trajectory)
    conversation = base["conversation"]
    at = next((i for i, v in enumerate(conversation) if v.message.step_index == step_index), None)
    step_view = conversation[at] if at is not None else None
    # Annotators judge blind: on overlapped items they see only their own corrections (what agreement
    # measures); reviewers and researchers see everyone's.
    sees_all = annotates_anywhere(user)
    annotations = Annotation.objects.select_related("author", "head", "accepted_revision").order_by("id")
    if not sees_all:
        annotations = annotations.filter(author=user)
    critiques = [CritiqueView(c) for c in trajectory.critiques.filter(step_index=step_index)
                 .select_related("checkpoint", "job").prefetch_related(Prefetch("annotations", queryset=annotations))
                 .order_by("-id")[:50]]
    for view in critiques:
        view.annotations = list(view.critique.annotations.all())
    bare = list(annotations.filter(trajectory=trajectory, step_index=step_index, critique=None))
    chosen = annotation.critique if annotation is not None else None
    if chosen is None and critique_id is not None:
        chosen = next((v.critique for v in critiques if v.critique.pk == critique_id), None)
    if chosen is None and annotation is None and queue_item is not None and queue_item.critique_id:
        chosen = next((v.critique for v in critiques if v.critique.pk == queue_item.critique_id), None)
    if chosen is None and annotation is None and critiques and critique_id is None:
        chosen = critiques[0].critique
    target = Target(trajectory, step_index, chosen)
    if annotation is None:
        annotation = find_annotation(target, user)
    author = annotation.author if annotation is not None else user
    key = draft_key(target, author)
    draft = draft_for(user, key)
    original = model_fields(chosen)
    head = annotation.head if annotation is not None else None
    start = draft.fields if draft else (head.fields() if head else original)
    # A draft keeps the revision it was typed on: if that is stale, saving it shows the conflict.
    base_revision_id = draft.base_revision_id if draft else (head.pk if head else None)
    readable = visible_step_indices(user, trajectory)  # None: every step
    strip = verdict_strip(trajectory, step_index, _step_indices(base), None if sees_all else user)
    for cell in strip:
        cell.readable = readable is None or cell.step_index in readable
    return {
        **base,
        "step_index": step_index,
        "step": step_view,
        "before": conversation[:at] if at is not None else [],
        "after": conversation[at + 1:] if at is not None else [],
        "critiques": critiques,
        "bare_annotations": bare,
        "targets": list(trajectory.targets.filter(step_index=step_index).select_related("job", "checkpoint")
                        .order_by("-id")[:50]),
        "refinements": [(r, refined_action_view(r.record)) for r in trajectory.refinements.filter(
            step_index=step_index).select_related("job", "checkpoint").order_by("-id")[:50]],
        "strip": strip,
        "notes": list(trajectory.notes.filter(deleted_at=None).filter(
            Q(step_index=None) | Q(step_index=step_index)).order_by("id")[:100]),
        "chosen": chosen,
        "annotation": annotation,
        "editing_other": annotation is not None and annotation.author_id != user.pk,
        "head": head,
        "draft": draft,
        "draft_key": key,
        "base_revision_id": base_revision_id,
        "start": editor_values(start),
        "original": original,
        "diff_model": field_diffs(original, head.fields(), DIFF_FIELDS) if head else [],
        "diff_parent": (field_diffs(head.parent.fields(), head.fields(), DIFF_FIELDS)
                        if head and head.parent_id else []),
        "queue_item": queue_item,
        "prev_step": _neighbour(base, step_index, -1, readable),
        "next_step": _neighbour(base, step_index, +1, readable),
        "text_fields": TEXT_FIELDS,
        "fields": FIELDS,
    }


def _step_indices(base) -> list[int]:
    """The trajectory's step numbers, from the messages the detail context already read."""
    return sorted(v.message.step_index for v in base["steps"])


def _neighbour(base, step_index: int, direction: int, readable: frozenset[int] | None) -> int | None:
    """The next step (j) or the previous one (k) that the user may open."""
    indices = [i for i in _step_indices(base) if readable is None or i in readable]
    before = [i for i in indices if i < step_index]
    after = [i for i in indices if i > step_index]
    if direction < 0:
        return before[-1] if before else None
    return after[0] if after else None


def refined_action_view(record: dict) -> dict:
    """A refinement's action in the same shape the conversation shows actions: text and tool calls."""
    text = str((record or {}).get("refined_action") or "")
    action, _ = parse_tool_action(text)
    if action is None:  # not in the policy's format: show what the model wrote
        return {"content": text, "tool_calls": []}
    calls = [{"name": action.tool_call.name, "arguments_json": detail.pretty_json(action.tool_call.arguments)}
             ] if action.tool_call else []
    return {"content": action.text, "tool_calls": calls}
