"""Who may see and build datasets: researchers and admins (they launch the training jobs that use them)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404

from webapp.accounts.access import is_researcher, require
from webapp.datasets.models import Dataset, Export, Snapshot


def can_curate(user) -> bool:
    return is_researcher(user)


def require_curate(user) -> None:
    require(can_curate(user))


def get_dataset(user, pk: int) -> Dataset:
    require_curate(user)
    return get_object_or_404(Dataset.objects.select_related("project", "created_by"), pk=pk)


def get_snapshot(user, pk: int) -> Snapshot:
    require_curate(user)
    return get_object_or_404(Snapshot.objects.select_related("dataset__project", "created_by", "job"), pk=pk)


def get_export(user, pk: int) -> Export:
    require_curate(user)
    return get_object_or_404(Export.objects.select_related("snapshot__dataset"), pk=pk)
