"""Saving corrections. Every save appends a Revision and moves its annotation's head
with a conditional UPDATE on the head it was based on: exactly one row changes, or
the save was stale and nothing is written (``Conflict`` carries the head that won).

``check_*`` validates and calls ``do_*``; views call ``check_*``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from webapp.annotation.models import FIELDS, Annotation, Assignment, Draft, QueueItem, Revision
from webapp.annotation.services import audit
from webapp.annotation.services.assignments import do_finish_assignment, do_reopen_assignment
from webapp.jobs.models import StepCritique
from webapp.trajectories.models import Trajectory


@dataclass(frozen=True)
class Target:
    """What is being corrected: a step, and the model critique of it (None: a step no model critiqued)."""

    trajectory: Trajectory
    step_index: int
    critique: StepCritique | None = None

    @classmethod
    def of(cls, annotation: Annotation) -> Target:
        return cls(annotation.trajectory, annotation.step_index, annotation.critique)


class Conflict(Exception):
    """The annotation moved on since the editor loaded it: ``head`` is the revision now current."""

    def __init__(self, annotation: Annotation, head: Revision | None):
        super().__init__(f"annotation {annotation.pk} was saved by someone else in between")
        self.annotation = annotation
        self.head = head


class RevisionRefused(Exception):
    """A save that makes no sense (a critique of another step, a deleted annotation edited by a non-owner...)."""


def model_fields(critique: StepCritique | None) -> dict:
    """The model's critique in revision fields: what the editor starts from and diffs compare against."""
    if critique is None:
        return {name: ([] if name == "refined_tool_calls" else False if name == "skipped" else "") for name in FIELDS}
    record = critique.record or {}
    prob = critique.success_prob
    return {
        "predicted_future": record.get("predicted_future") or "",
        "predicted_outcome": "" if prob is None else ("success" if prob >= 0.5 else "failure"),
        "verdict": critique.verdict or "",
        "reasoning": record.get("reasoning") or "",
        "suggestion": record.get("suggestion") or "",
        "refined_content": "", "refined_tool_calls": [], "rating": "", "comment": "",
        "skipped": False, "skip_reason": "",
    }


def find_annotation(target: Target, author) -> Annotation | None:
    query = Annotation.objects.filter(author=author)
    if target.critique is not None:
        return query.filter(critique=target.critique).first()
    return query.filter(trajectory=target.trajectory, step_index=target.step_index, critique=None).first()


def _annotation_for(target: Target, author) -> Annotation:
    found = find_annotation(target, author)
    if found is not None:
        return found
    try:
        with transaction.atomic():  # a savepoint: a concurrent first save of the same target loses cleanly
            return Annotation.objects.create(trajectory=target.trajectory, step_index=target.step_index,
                                             critique=target.critique, author=author)
    except IntegrityError:
        return find_annotation(target, author)


def check_save_revision(actor, target: Target, fields: dict, base_revision_id: int | None, *,
                        annotation: Annotation | None = None, queue_item: QueueItem | None = None) -> Revision:
    if target.critique is not None and (target.critique.trajectory_id != target.trajectory.pk
                                        or target.critique.step_index != target.step_index):
        raise RevisionRefused("that critique belongs to another step")
    if not target.trajectory.messages.filter(step_index=target.step_index).exists():
        raise RevisionRefused(f"trajectory {target.trajectory.pk} has no agent step {target.step_index}")
    if annotation is not None and Target.of(annotation) != target:
        raise RevisionRefused("that annotation belongs to another step or critique")
    if queue_item is not None and (queue_item.trajectory_id, queue_item.step_index) != (target.trajectory.pk,
                                                                                         target.step_index):
        raise RevisionRefused("that queue item is another step")
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise RevisionRefused(f"unknown fields: {', '.join(sorted(unknown))}")
    return do_save_revision(actor, target, fields, base_revision_id, annotation=annotation, queue_item=queue_item)


@transaction.atomic
def do_save_revision(actor, target: Target, fields: dict, base_revision_id: int | None, *,
                     annotation: Annotation | None = None, queue_item: QueueItem | None = None,
                     restored_from: Revision | None = None, action: str = "revision.save") -> Revision:
    annotation = annotation or _annotation_for(target, actor)
    full = {**model_fields(None), **fields}
    revision = Revision.objects.create(annotation=annotation, parent_id=base_revision_id, author=actor,
                                       queue_item=queue_item, restored_from=restored_from, **full)
    state = Annotation.SKIPPED if full["skipped"] else Annotation.SUBMITTED
    moved = Annotation.objects.filter(pk=annotation.pk, head_id=base_revision_id).update(
        head=revision, state=state, return_reason="", deleted_at=None, deleted_by=None, updated_at=timezone.now())
    if moved != 1:
        head = Revision.objects.filter(pk=Annotation.objects.filter(pk=annotation.pk).values("head_id")[:1]).first()
        raise Conflict(annotation, head)
    before = Revision.objects.get(pk=base_revision_id).fields() if base_revision_id else None
    audit.record(actor, action, revision, before=before, after=full, trajectory_id=annotation.trajectory_id)
    Draft.objects.filter(user=actor, key=draft_key(target, annotation.author)).delete()
    if queue_item is not None:
        do_finish_assignment(queue_item, annotation.author, annotation,
                             Assignment.SKIPPED if full["skipped"] else Assignment.DONE)
    return revision


def draft_key(target: Target, author) -> str:
    critique = target.critique.pk if target.critique is not None else "none"
    return f"t{target.trajectory.pk}:s{target.step_index}:c{critique}:a{author.pk}"


def check_restore(actor, revision: Revision, base_revision_id: int | None) -> Revision:
    """Restore = a new revision with an old one's fields, on top of the current head."""
    annotation = revision.annotation
    return do_save_revision(actor, Target.of(annotation), revision.fields(), base_revision_id,
                            annotation=annotation, restored_from=revision, action="revision.restore")


@transaction.atomic
def do_undo_last(actor) -> Annotation | None:
    """Undo the actor's latest save that is still current: revert to its parent (a new revision), or
    withdraw the annotation (soft-deleted, restorable) when it was the first. Returns the annotation."""
    revision = (Revision.objects.filter(author=actor, annotation__head_id=F("pk"), annotation__deleted_at=None)
                .select_related("annotation", "parent").order_by("-id").first())
    if revision is None:
        return None
    annotation = revision.annotation
    if revision.parent is not None:
        do_save_revision(actor, Target.of(annotation), revision.parent.fields(), revision.pk, annotation=annotation,
                         restored_from=revision.parent, action="revision.undo", queue_item=revision.queue_item)
        return annotation
    do_delete(actor, annotation, action="revision.undo")
    if revision.queue_item_id:
        do_reopen_assignment(revision.queue_item, annotation.author)
    return annotation


@transaction.atomic
def do_delete(actor, annotation: Annotation, *, action: str = "annotation.delete") -> None:
    if Annotation.objects.filter(pk=annotation.pk, deleted_at=None).update(
            deleted_at=timezone.now(), deleted_by=actor, updated_at=timezone.now()) == 1:
        audit.record(actor, action, annotation, before={"deleted": False}, after={"deleted": True})


@transaction.atomic
def do_restore_deleted(actor, annotation: Annotation) -> None:
    if Annotation.objects.filter(pk=annotation.pk, deleted_at__isnull=False).update(
            deleted_at=None, deleted_by=None, updated_at=timezone.now()) == 1:
        audit.record(actor, "annotation.restore", annotation, before={"deleted": True}, after={"deleted": False})
