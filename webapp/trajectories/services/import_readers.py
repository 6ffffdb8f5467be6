"""The reading half of an import: each item of a file parsed, hashed and turned into the rows it will be stored as
(JSON as text, the search document), ready for the writer (``imports._Writer``), which only adds the ids and writes.

A big file of a format that takes shards (``nlac_core.formats.sharded``) is read by ``NLAC_IMPORT_PROCESSES``
reader processes at once (by default the machine's cores, at most 4; ``webapp.forked``): blocks of BLOCK items are
dealt round robin (``base.Shard``); a reader decodes the whole file's JSON but parses only its blocks, and sends each
block's prepared items back, pickled. The writer takes them in the file's order, so ids and record indexes are those
of one process. A reader that meets bad input sends the items of its block before it and the error, and stops; the
writer, on reaching it, reads the file again in order to the first bad place, so the error is the one a single
process reports (an import that fails is rolled back whole). Memory stays flat: a reader runs at most AHEAD bytes
ahead. Small files, and formats read as a whole, are read in the writer's process.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from django.conf import settings

from nlac_core.formats import FormatError, Item, Shard, read, sharded
from nlac_core.records import TaskRecord
from webapp import bulk, forked
from webapp.trajectories import convert, search
from webapp.trajectories.models import Message, Trajectory

TRAJECTORIES = bulk.Table(Trajectory, convert.TRAJECTORY_COLUMNS)
MESSAGES = bulk.Table(Message, convert.MESSAGE_COLUMNS)
BLOCK = 16  # items dealt to a reader at a time, sent together
# Bytes of each reader's blocks (pickled) held before the writer asks for them: about 1,500 tau-bench episodes, so that
# the readers go on while the writer stops to write a batch (memory: readers x AHEAD).
AHEAD = 32 << 20
PARALLEL_MIN_BYTES = 8 << 20  # below this, starting readers costs more than it saves
# What a reader may meet in bad input besides a FormatError: the import fails the file with it, as in one process.
BAD_INPUT = (ValueError, OverflowError, RecursionError, UnicodeError)


class Prepared(NamedTuple):
    """One item of a file, as the writer stores it."""

    where: str
    index: int
    task: TaskRecord
    task_key: tuple[str, str]  # (external id, content hash): the task's identity in its project
    content_hash: str | None = None  # None: a task of the file, not a trajectory
    earlier: str | None = None  # the hash an earlier version stored this episode under (tau-bench labels)
    too_long: tuple[str, int] | None = None  # the first value longer than its column: (field, limit)
    trajectory: list | None = None  # TRAJECTORY_COLUMNS, JSON as text, the context columns None
    messages: list[list] | None = None  # MESSAGE_COLUMNS, JSON as text, trajectory id 0
    document: str = ""


class ReaderFailed(ValueError):
    """Bad input a reader process met that was not a FormatError; worded as it would be in one process."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def prepare(item: Item, *, legacy: bool, source_format: str, imported_from: str) -> Prepared:
    record = item.record
    if isinstance(record, TaskRecord):
        return Prepared(item.where, item.index, record, (record.external_id, record.content_hash()))
    h = record.content_hash()
    earlier = None
    if record.source_model_from_file_name and legacy:
        # Before file names left the hash, this episode was stored under a hash that included its label.
        earlier = replace(record, source_model_from_file_name=False).content_hash()
    overflow = convert.too_long(record)
    if overflow is not None:
        return Prepared(item.where, item.index, record.task, ("", ""), h, too_long=overflow)
    row = convert.trajectory_values(record, h, source_format=source_format, imported_from=imported_from,
                                    record_index=item.index)
    return Prepared(item.where, item.index, record.task, (record.task.external_id, record.task.content_hash()), h,
                    earlier, None, next(TRAJECTORIES.json_text([row])),
                    list(MESSAGES.json_text(convert.message_values(record, 0))), search.indexed(record))


def processes() -> int:
    return forked.processes(getattr(settings, "NLAC_IMPORT_PROCESSES", 0))


def _checked(item: Prepared, path: Path) -> Prepared:
    if item.too_long is not None:
        field, limit = item.too_long
        raise FormatError(path, item.where, f"longer than {limit} characters", field)
    return item


def prepared_items(path: Path, fmt: str, source_model: str, *, legacy: bool, imported_from: str,
                   n: int | None = None) -> Iterator[Prepared]:
    """The file's items in order, prepared; by ``n`` reader processes when the file is big enough to gain. Bad input
    raises a FormatError (a value too long for its column included) naming the first bad place in the file."""
    n = processes() if n is None else n
    options = {"legacy": legacy, "source_format": fmt, "imported_from": imported_from}
    if n < 2 or not forked.available() or not sharded(fmt) or path.stat().st_size < PARALLEL_MIN_BYTES:
        for item in read(path, fmt, source_model=source_model):
            yield _checked(prepare(item, **options), path)
        return

    def reader(k: int, n: int, send: forked.Send) -> None:
        _read_blocks(path, fmt, source_model, options, Shard(k, n, BLOCK), send)

    for items, error in forked.in_order(n, reader, ahead=AHEAD):
        for item in items:
            yield _checked(item, path)
        if error is not None:
            # Which error one process would have met first depends on blocks other readers may not have reached:
            # read the file again here, in order, to it (a failed import is rolled back whatever was written).
            for item in read(path, fmt, source_model=source_model):
                _checked(prepare(item, **options), path)
            kind, payload = error
            raise FormatError(*payload) if kind == "format" else ReaderFailed(*payload)


def _read_blocks(path: Path, fmt: str, source_model: str, options: dict, shard: Shard, send: forked.Send) -> None:
    """One reader: sends ``(items, None)`` per block of its shard; at bad input, the items of its block read before
    it and the error, ``(items, ("format", FormatError's arguments))`` or ``(items, ("failed", (kind, message)))``,
    and stops."""
    gc.disable()  # as in the writer (imports._no_cycle_collector): parsing makes no cycles
    items: list[Prepared] = []
    block = None
    try:
        for item in read(path, fmt, source_model=source_model, shard=shard):
            if shard.block_of_last() != block and items:
                send((items, None))
                items = []
            block = shard.block_of_last()
            items.append(prepare(item, **options))
    except FormatError as exc:
        send((items, ("format", (exc.path, exc.where, exc.message, exc.field))))
        return
    except BAD_INPUT as exc:
        send((items, ("failed", (type(exc).__name__, str(exc)))))
        return
    if items:
        send((items, None))
