"""Who may see and change trajectories. Every view asks here, once."""

from __future__ import annotations

from django.shortcuts import get_object_or_404

from webapp.accounts.access import has_any_role, is_researcher, require
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


def get_project(user, slug: str) -> Project:
    require_browse(user)
    return get_object_or_404(Project, slug=slug)


def get_trajectory(user, pk: int) -> Trajectory:
    require_browse(user)
    return get_object_or_404(Trajectory.objects.select_related("project", "task"), pk=pk)
