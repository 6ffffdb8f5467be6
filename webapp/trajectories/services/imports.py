"""Import files of any supported format into a project.

Atomic per file (a malformed record anywhere rolls the whole file back and
records a failed ImportBatch with the error's place), idempotent (a trajectory
is stored once per project, by content hash, which leaves out a source model guessed
from the file's name, so a renamed copy adds nothing; a file already imported is
recognised by its sha256 and skipped without parsing), streaming (records are
read one at a time and written in batches, so memory stays flat).
"""

from __future__ import annotations

import gc
import hashlib
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.db import DatabaseError, transaction
from django.utils import timezone

from nlac_core.formats import FormatError, Item, detect
from nlac_core.records import TrajectoryRecord
from webapp import bulk
from webapp.trajectories import convert, search
from webapp.trajectories.models import ImportBatch, Message, Project, Task, Trajectory
from webapp.trajectories.services.import_readers import (
    MESSAGES,
    TRAJECTORIES,
    Prepared,
    ReaderFailed,
    prepare,
    prepared_items,
)
from webapp.trajectories.services.projects import do_refresh_summary

TRAJECTORY_BATCH = 500  # records read, then written together (their messages in one bulk load)
TASKS = bulk.Table(Task, convert.TASK_COLUMNS)
WRITTEN = (Task, Trajectory, Message)  # the tables an import loads, in this order


@dataclass
class ImportResult:
    batch: ImportBatch
    already_imported: bool = False

    @property
    def ok(self) -> bool:
        return self.batch.status == ImportBatch.SUCCEEDED


def _complete_import(project: Project, sha: str, fmt: str | None, source_model: str) -> ImportBatch | None:
    """An earlier import of this exact file, with the same options, whose trajectories are all
    still there: the one case where the file need not be read again."""
    previous = ImportBatch.objects.filter(project=project, file_sha256=sha, status=ImportBatch.SUCCEEDED,
                                          requested_format=fmt or "", source_model=source_model).first()
    if previous is None or previous.n_skipped:
        return None
    if Trajectory.objects.filter(import_batch=previous).count() != previous.n_added:
        return None
    return previous


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _Writer:
    """Takes prepared items (``import_readers``) and writes them in batches inside the file's transaction: skips the
    episodes already stored, creates the new tasks, then bulk-loads trajectories, messages and search documents."""

    def __init__(self, project: Project, batch: ImportBatch):
        self.project = project
        self.batch = batch
        self.tasks: dict[tuple[str, str], int] = {  # (external id, content hash) -> task id
            (external_id, content_hash): pk for external_id, content_hash, pk in
            Task.objects.filter(project=project).values_list("external_id", "content_hash", "id")}
        self.pending: list[Prepared] = []
        self.seen_hashes: set[str] = set()

    def legacy(self) -> bool:
        """Whether this project may hold tau-bench episodes under the hash an earlier version gave them (their
        label in it): only then is the second hash worth making."""
        return Trajectory.objects.filter(project=self.project, source_format="tau-bench",
                                         source_model_from_file_name=False).exists()

    def task_ids(self, items: list[Prepared]) -> list[int]:
        """The stored task of each item, the new ones bulk-loaded together."""
        new = {}
        for item in items:
            if item.task_key not in self.tasks and item.task_key not in new:
                new[item.task_key] = convert.task_values(item.task, self.project.pk, item.task_key[1])
        if new:
            TASKS.load(new.values())
            for external_id, content_hash, pk in Task.objects.filter(
                    project=self.project, content_hash__in={key[1] for key in new}).values_list(
                    "external_id", "content_hash", "id"):
                self.tasks[(external_id, content_hash)] = pk
            self.batch.n_tasks += len(new)
        return [self.tasks[item.task_key] for item in items]

    def add(self, item: Prepared) -> None:
        self.batch.n_records += 1
        self.pending.append(item)
        if len(self.pending) >= TRAJECTORY_BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        hashes = [item.content_hash for item in self.pending]
        hashes += [item.earlier for item in self.pending if item.earlier]
        existing = set(Trajectory.objects.filter(project=self.project, content_hash__in=hashes)
                       .values_list("content_hash", flat=True))
        fresh = []
        for item in self.pending:
            if item.content_hash in existing or item.content_hash in self.seen_hashes or item.earlier in existing:
                self.batch.n_skipped += 1
                continue
            self.seen_hashes.add(item.content_hash)
            fresh.append(item)
        self.pending = []
        if not fresh:
            return
        tasks = self.task_ids(fresh)  # before the load: no query while a COPY runs
        project, batch, now = self.project.pk, self.batch.pk, timezone.now()
        TRAJECTORIES.load((convert.in_context(item.trajectory, project, task, batch, now)
                           for item, task in zip(fresh, tasks, strict=True)), json_as_text=True)
        ids = dict(Trajectory.objects.filter(project=self.project, content_hash__in=[i.content_hash for i in fresh])
                   .values_list("content_hash", "id"))
        messages = []
        for item in fresh:
            trajectory_id = ids[item.content_hash]
            for row in item.messages:  # the reader's rows, trajectory id 0: filled in where they are
                row[0] = trajectory_id
            messages += item.messages
        self.batch.n_messages += MESSAGES.load(messages, json_as_text=True)
        search.index((ids[item.content_hash], item.document) for item in fresh)
        self.batch.n_added += len(fresh)
        gc.collect(0)  # the cycles a batch's queries leave (see _no_cycle_collector)


@contextmanager
def _no_cycle_collector():
    """Reading a file allocates millions of short-lived objects that hold no cycles; the cyclic garbage collector,
    which wakes every 700 allocations and walks the survivors, took about a third of an import's time. Reference
    counting frees them as before; the few cycles a batch's queries leave are collected after each batch
    (``gc.collect(0)`` in ``_Writer.flush``), so memory stays flat."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def do_import_file(
    path: str | Path,
    project: Project,
    *,
    fmt: str | None = None,
    source_model: str = "",
    user=None,
    display_name: str | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import one file into ``project``. Never raises for bad input: the result's
    batch has ``status=failed`` and an ``error`` that names the place."""
    path = Path(path)
    display_name = display_name or path.name
    started = time.monotonic()
    sha = file_sha256(path)
    batch = ImportBatch(project=project, file_name=display_name, file_sha256=sha, file_size=path.stat().st_size,
                        created_by=user if getattr(user, "is_authenticated", False) else None)
    previous = _complete_import(project, sha, fmt, source_model)
    if previous is not None:
        return ImportResult(previous, already_imported=True)
    where = ""
    try:
        batch.format = fmt or detect(path)
        with _no_cycle_collector(), transaction.atomic(), bulk.checked_as_written(*WRITTEN):
            batch.status = ImportBatch.SUCCEEDED
            batch.requested_format = fmt or ""
            batch.source_model = source_model
            batch.save()
            writer = _Writer(project, batch)
            for item in prepared_items(path, batch.format, source_model, legacy=writer.legacy(),
                                       imported_from=display_name):
                where = item.where
                if item.content_hash is None:  # a task of the file
                    writer.task_ids([item])
                    continue
                writer.add(item)
                if on_progress is not None:
                    on_progress(1)
            writer.flush()
            batch.duration_s = time.monotonic() - started
            batch.save()
    except (FormatError, DatabaseError, ValueError, OverflowError, RecursionError, UnicodeError) as exc:
        # FormatError names its place; anything else the readers did not foresee (a value the
        # database refuses, a concurrent import of the same records) still fails the file as a whole.
        if isinstance(exc, FormatError):
            error = str(exc)
        else:
            near = f", near {where}" if where else ""
            kind = exc.kind if isinstance(exc, ReaderFailed) else type(exc).__name__
            error = f"{display_name}{near}: could not be stored ({kind}: {exc})"
        batch.pk = None  # the row saved inside the rolled-back transaction is gone
        batch.status = ImportBatch.FAILED
        batch.error = error
        batch.n_added = batch.n_messages = batch.n_tasks = 0
        batch.duration_s = time.monotonic() - started
        batch.save()
        return ImportResult(batch)
    do_refresh_summary(project)
    return ImportResult(batch)


def do_store_records(project: Project, records: list[TrajectoryRecord], display_name: str, *, fmt: str = "rollout",
                     user=None) -> ImportBatch:
    """Store trajectories made here (a rollout job's episodes) like an imported file: one ImportBatch, one
    transaction, the same dedup by content hash (storing the same episodes twice adds nothing)."""
    started = time.monotonic()
    payload = "".join(r.content_hash() for r in records).encode()
    batch = ImportBatch(project=project, file_name=display_name, file_sha256=hashlib.sha256(payload).hexdigest(),
                        format=fmt, requested_format=fmt, status=ImportBatch.SUCCEEDED,
                        created_by=user if getattr(user, "is_authenticated", False) else None)
    for record in records:
        overflow = convert.too_long(record)
        if overflow is not None:
            raise ValueError(f"{display_name}: {record.external_id}: {overflow[0]} is longer than {overflow[1]} "
                             "characters")
    with transaction.atomic(), bulk.checked_as_written(*WRITTEN):
        batch.save()
        writer = _Writer(project, batch)
        legacy = writer.legacy()
        for index, record in enumerate(records):
            writer.add(prepare(Item("", index, record), legacy=legacy, source_format=fmt, imported_from=display_name))
        writer.flush()
        batch.duration_s = time.monotonic() - started
        batch.save()
    do_refresh_summary(project)
    return batch

