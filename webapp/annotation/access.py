"""Who may annotate, review and manage queues. Every annotation view asks here.

Annotators work only on (and read only) the steps of queues they are assigned to; reviewers and admins
review (and may save into an annotator's annotation); researchers create queues and
may annotate any step; outsiders (no role) see nothing.
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404

from webapp.accounts.access import has_any_role, is_researcher, require
from webapp.accounts.roles import ADMIN, ANNOTATOR, REVIEWER, roles_of
from webapp.annotation.models import Annotation, Queue, QueueItem
from webapp.trajectories.access import can_read_step
from webapp.trajectories.models import Trajectory


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


def get_step_to_annotate(user, trajectory_id: int, step_index: int) -> Trajectory:
    """The trajectory of a step the user may save into: refused (403) before anything is read, so a write
    tells an annotator nothing about a trajectory outside their queues."""
    require(has_any_role(user))
    require(can_annotate_step(user, trajectory_id, step_index))
    return get_object_or_404(Trajectory.objects.select_related("project", "task"), pk=trajectory_id)


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
    if not can_read_step(user, annotation.trajectory_id, annotation.step_index):
        raise Http404("that step is in none of your queues")  # one's own, on a step no longer in a queue
    return annotation
