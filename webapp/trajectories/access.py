"""Who may see and change trajectories. Every view asks here, once.

Reads: reviewers, researchers and admins read every project, trajectory and step. An annotator (with no
other role) reads only the steps of the queues they are assigned to, the trajectories those steps belong
to and the projects holding them; anything else answers 404, as if it did not exist, so an id or a slug
tells them nothing. Every read path (pages, partials, the API) starts from ``visible_trajectories`` /
``visible_projects`` / ``can_read_step``, so the rule lives here once.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from webapp.accounts.access import has_any_role, is_researcher, require
from webapp.accounts.roles import ADMIN, RESEARCHER, REVIEWER, roles_of
from webapp.annotation.models import QueueItem
from webapp.trajectories.models import Project, Trajectory


def can_browse(user) -> bool:
    return has_any_role(user)


def can_import(user) -> bool:
    return is_researcher(user)


def can_export(user) -> bool:
    return is_researcher(user)


def require_browse(user) -> None:
    require(can_browse(user))


def require_import(user) -> None:
    require(can_import(user))


def reads_everything(user) -> bool:
    return bool(roles_of(user) & {REVIEWER, RESEARCHER, ADMIN})


def _queue_items_of(user) -> QuerySet[QueueItem]:
    return QueueItem.objects.filter(queue__assignees=user)


def visible_trajectories(user) -> QuerySet[Trajectory]:
    """The trajectories the user may read: an EXISTS on the queue items, so the list stays one query."""
    require_browse(user)
    if reads_everything(user):
        return Trajectory.objects.all()
    return Trajectory.objects.filter(Exists(_queue_items_of(user).filter(trajectory_id=OuterRef("pk"))))


def visible_projects(user) -> QuerySet[Project]:
    require_browse(user)
    if reads_everything(user):
        return Project.objects.all()
    return Project.objects.filter(Exists(_queue_items_of(user).filter(trajectory__project_id=OuterRef("pk"))))


def visible_step_indices(user, trajectory: Trajectory) -> frozenset[int] | None:
    """The steps of a (visible) trajectory the user may open: None for all of them."""
    if reads_everything(user):
        return None
    return frozenset(_queue_items_of(user).filter(trajectory=trajectory).values_list("step_index", flat=True))


def can_read_step(user, trajectory_id: int, step_index: int) -> bool:
    if reads_everything(user):
        return True
    return _queue_items_of(user).filter(trajectory_id=trajectory_id, step_index=step_index).exists()


def get_project(user, slug: str) -> Project:
    return get_object_or_404(visible_projects(user), slug=slug)


def get_trajectory(user, pk: int) -> Trajectory:
    return get_object_or_404(visible_trajectories(user).select_related("project", "task"), pk=pk)


def get_step(user, pk: int, step_index: int) -> Trajectory:
    """The trajectory of a step the user may read (404 for a step outside an annotator's queues)."""
    trajectory = get_trajectory(user, pk)
    if not can_read_step(user, pk, step_index):
        raise Http404(f"step {step_index} of trajectory {pk} is in none of your queues")
    return trajectory
