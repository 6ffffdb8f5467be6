"""Who may annotate, review and manage queues. Every annotation view asks here.

Annotators work only on the steps of queues they are assigned to; reviewers and admins
review (and may save into an annotator's annotation); researchers create queues and
may annotate any step; outsiders (no role) see nothing.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404

from webapp.accounts.access import has_any_role, is_researcher, require
from webapp.accounts.roles import ADMIN, ANNOTATOR, REVIEWER, roles_of
from webapp.annotation.models import Annotation, Queue, QueueItem


def is_reviewer(user) -> bool:
    return bool(roles_of(user) & {REVIEWER, ADMIN})


def can_review(user) -> bool:
    return is_reviewer(user)


def can_read_audit(user) -> bool:
    return is_reviewer(user)


def can_create_queue(user) -> bool:
    return is_researcher(user)


def annotates_anywhere(user) -> bool:
    return is_researcher(user) or is_reviewer(user)


def can_annotate_step(user, trajectory_id: int, step_index: int) -> bool:
    if annotates_anywhere(user):
        return True
    if ANNOTATOR not in roles_of(user):
        return False
    return QueueItem.objects.filter(trajectory_id=trajectory_id, step_index=step_index,
                                    queue__assignees=user).exists()


def can_edit_annotation(user, annotation: Annotation) -> bool:
    if annotation.author_id == user.pk:
        return can_annotate_step(user, annotation.trajectory_id, annotation.step_index)
    return is_reviewer(user)


def queues_for(user):
    require(has_any_role(user))
    if annotates_anywhere(user):
        return Queue.objects.all()
    return Queue.objects.filter(assignees=user)


def get_queue(user, pk: int) -> Queue:
    return get_object_or_404(queues_for(user).select_related("project"), pk=pk)


def get_annotation(user, pk: int) -> Annotation:
    require(has_any_role(user))
    annotation = get_object_or_404(Annotation.objects.select_related("trajectory", "critique", "author", "head"),
                                   pk=pk)
    require(annotation.author_id == user.pk or annotates_anywhere(user))
    return annotation
