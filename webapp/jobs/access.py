"""Who may see and run jobs and checkpoints: researchers (and admins). Annotators get 403."""

from __future__ import annotations

from django.shortcuts import get_object_or_404

from webapp.accounts.access import is_researcher, require
from webapp.jobs.models import Checkpoint, Job


def can_run_jobs(user) -> bool:
    return is_researcher(user)


def require_jobs(user) -> None:
    require(can_run_jobs(user))


def get_job(user, pk: int) -> Job:
    require_jobs(user)
    return get_object_or_404(Job.objects.select_related("checkpoint", "created_by", "parent"), pk=pk)


def get_checkpoint(user, pk: int) -> Checkpoint:
    require_jobs(user)
    return get_object_or_404(Checkpoint, pk=pk)
