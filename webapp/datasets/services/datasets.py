"""Creating datasets, and starting their builds and exports as jobs (the UI, the API and the CLI call these)."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction

from webapp.datasets.models import Dataset, Export, Snapshot
from webapp.datasets.services.build import do_create_snapshot
from webapp.datasets.services.exports import check_format
from webapp.datasets.services.specs import DatasetSpec, SpecError, check_kind
from webapp.jobs.configs import BuildSnapshotJob, ExportSnapshotJob
from webapp.jobs.selection import Selection
from webapp.jobs.services.lifecycle import do_create_job

NAME = re.compile(r"^[\w][\w .\-]{0,149}$")


def check_name(name: str) -> str:
    name = (name or "").strip()
    if not NAME.match(name):
        raise SpecError("name", "1 to 150 letters, digits, spaces, dots, dashes or underscores")
    return name


def check_create_dataset(actor, name: str, kind: str, project, spec: dict | None = None,
                         description: str = "") -> Dataset:
    name = check_name(name)
    check_kind(kind)
    parsed = DatasetSpec.parse(spec)
    taken = SpecError("name", f"a dataset named {name!r} exists; build a new version of it instead")
    if Dataset.objects.filter(name=name).exists():
        raise taken
    try:
        with transaction.atomic():
            return Dataset.objects.create(name=name, kind=kind, project=project, spec=parsed.to_dict(),
                                          description=description.strip(),
                                          created_by=actor if getattr(actor, "is_authenticated", False) else None)
    except IntegrityError:  # made by another request between the check and the insert
        raise taken from None


def check_create_and_build(actor, name: str, kind: str, project, spec: dict | None = None, description: str = "",
                           notes: str = "", build: bool = True):
    """A dataset and (unless ``build`` is false) its v1 build job, together or not at all."""
    with transaction.atomic():
        dataset = check_create_dataset(actor, name, kind, project, spec, description)
        started = do_start_build(actor, dataset, notes) if build else (None, None)
    return dataset, *started


def check_update_spec(dataset: Dataset, spec: dict) -> Dataset:
    """A new definition for the next builds; built snapshots keep the spec they were built from."""
    dataset.spec = DatasetSpec.parse(spec).to_dict()
    dataset.save(update_fields=["spec"])
    return dataset


def do_start_build(actor, dataset: Dataset, notes: str = ""):
    """The next version, built by a build-snapshot job on the cpu queue. Returns (snapshot, job)."""
    with transaction.atomic():
        snapshot = do_create_snapshot(dataset, actor, notes.strip())
        job = do_create_job(actor, BuildSnapshotJob(snapshot=snapshot.pk), Selection())
        Snapshot.objects.filter(pk=snapshot.pk).update(job=job)
    snapshot.job = job
    return snapshot, job


def check_start_export(actor, snapshot: Snapshot, fmt: str, split: str = ""):
    """An export of a built snapshot in one format, written by an export-snapshot job. Returns (export, job)."""
    check_format(snapshot, fmt, split)
    with transaction.atomic():
        export = Export.objects.create(snapshot=snapshot, format=fmt, split=split,
                                       created_by=actor if getattr(actor, "is_authenticated", False) else None)
        job = do_create_job(actor, ExportSnapshotJob(export=export.pk), Selection())
        Export.objects.filter(pk=export.pk).update(job=job)
    export.job = job
    return export, job
