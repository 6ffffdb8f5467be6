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
from dataclasses import dataclass, replace
from pathlib import Path

from django.db import DatabaseError, transaction
from django.utils import timezone

from nlac_core.formats import FormatError, detect, read
from nlac_core.records import TaskRecord, TrajectoryRecord
from webapp import bulk
from webapp.trajectories import convert, search
from webapp.trajectories.models import ImportBatch, Message, Project, Task, Trajectory
from webapp.trajectories.services.projects import do_refresh_summary

TRAJECTORY_BATCH = 500  # records parsed, then written together (their messages in one bulk load)
TRAJECTORIES = bulk.Table(Trajectory, convert.TRAJECTORY_COLUMNS)
MESSAGES = bulk.Table(Message, convert.MESSAGE_COLUMNS)


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
    """Buffers trajectories and writes them in batches inside the file's transaction."""

    def __init__(self, project: Project, batch: ImportBatch, display_name: str, fmt: str):
        self.project = project
        self.batch = batch
        self.display_name = display_name
        self.fmt = fmt
        self.tasks: dict[tuple[str, str], int] = {  # (external id, content hash) -> task id
            (external_id, content_hash): pk for external_id, content_hash, pk in
            Task.objects.filter(project=project).values_list("external_id", "content_hash", "id")}
        self.pending: list[tuple[int, TrajectoryRecord, str]] = []
        self.earlier: dict[str, str] = {}  # content hash -> the hash an earlier version stored for that episode
        # only tau-bench rows stored without the flag can hold such a hash: otherwise hash each record once
        self.legacy = Trajectory.objects.filter(project=project, source_format="tau-bench",
                                                source_model_from_file_name=False).exists()
        self.seen_hashes: set[str] = set()

    def task_ids(self, records: list[TaskRecord]) -> list[int]:
        """The stored task of each record, the new ones created together."""
        keys = [(record.external_id, record.content_hash()) for record in records]
        new = {}
        for key, record in zip(keys, records, strict=True):
            if key not in self.tasks and key not in new:
                new[key] = Task(project=self.project, external_id=key[0], content_hash=key[1],
                                **convert.task_fields(record))
        for key, task in zip(new, Task.objects.bulk_create(new.values()), strict=True):
            self.tasks[key] = task.pk
        self.batch.n_tasks += len(new)
        return [self.tasks[key] for key in keys]

    def add(self, index: int, record: TrajectoryRecord) -> None:
        self.batch.n_records += 1
        h = record.content_hash()
        if record.source_model_from_file_name and self.legacy:
            # Before file names left the hash, this episode was stored under a hash that included its label.
            self.earlier[h] = replace(record, source_model_from_file_name=False).content_hash()
        self.pending.append((index, record, h))
        if len(self.pending) >= TRAJECTORY_BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        hashes = [h for _, _, h in self.pending]
        hashes += [self.earlier[h] for h in hashes if h in self.earlier]
        existing = set(Trajectory.objects.filter(project=self.project, content_hash__in=hashes)
                       .values_list("content_hash", flat=True))
        fresh = []
        for index, record, h in self.pending:
            if h in existing or h in self.seen_hashes or self.earlier.get(h) in existing:
                self.batch.n_skipped += 1
                continue
            self.seen_hashes.add(h)
            fresh.append((index, record, h))
        self.pending = []
        self.earlier = {}
        if not fresh:
            return
        tasks = self.task_ids([record.task for _, record, _ in fresh])  # before the load: no query during a COPY
        now = timezone.now()
        TRAJECTORIES.load(convert.trajectory_values(
            record, self.project.pk, task, h, source_format=self.fmt, imported_from=self.display_name,
            record_index=index, import_batch_id=self.batch.pk, created_at=now)
            for (index, record, h), task in zip(fresh, tasks, strict=True))
        ids = dict(Trajectory.objects.filter(project=self.project, content_hash__in=[h for _, _, h in fresh])
                   .values_list("content_hash", "id"))
        self.batch.n_messages += MESSAGES.load(row for _, record, h in fresh
                                               for row in convert.message_values(record, ids[h]))
        search.index((ids[h], search.document(record)) for _, record, h in fresh)
        self.batch.n_added += len(fresh)
        gc.collect(0)


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
        with _no_cycle_collector(), transaction.atomic():
            batch.status = ImportBatch.SUCCEEDED
            batch.requested_format = fmt or ""
            batch.source_model = source_model
            batch.save()
            writer = _Writer(project, batch, display_name, batch.format)
            for item in read(path, batch.format, source_model=source_model):
                where = item.where
                if isinstance(item.record, TaskRecord):
                    writer.task_ids([item.record])
                else:
                    overflow = convert.too_long(item.record)
                    if overflow is not None:
                        raise FormatError(path, item.where, f"longer than {overflow[1]} characters", overflow[0])
                    writer.add(item.index, item.record)
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
            error = f"{display_name}{near}: could not be stored ({type(exc).__name__}: {exc})"
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
    with transaction.atomic():
        batch.save()
        writer = _Writer(project, batch, display_name, fmt)
        for index, record in enumerate(records):
            writer.add(index, record)
        writer.flush()
        batch.duration_s = time.monotonic() - started
        batch.save()
    do_refresh_summary(project)
    return batch

