"""The reading half of an import: each item of a file parsed, hashed and turned into the rows it will be stored as
(JSON as text, the search document), ready for the writer (``imports._Writer``), which only adds the ids and writes.

A big file of a format that takes shards (``nlac_core.formats.sharded``) is read by ``NLAC_IMPORT_PROCESSES``
reader processes at once (by default the machine's cores, at most 4), forked from the writer (so they start at once,
with everything imported; a reader never touches the database and leaves with ``os._exit``, so the writer's
connection is not closed under it). A reader reads the whole file's JSON but parses only every n-th item
(``base.Shard``), and sends what it made down a pipe, pickled, a frame at a time. The writer takes the items back in
the file's order, round robin, so ids, record indexes and the first error met are the same as when one process
reads; a pipe holds a few frames at most, so memory stays flat. A reader that meets bad input sends the error (the
FormatError's place and message) in the item's turn. Small files, and formats read as a whole, are read in the
writer's process.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from django.conf import settings

from nlac_core.formats import FormatError, Item, Shard, read, sharded
from nlac_core.records import TaskRecord
from webapp import bulk
from webapp.trajectories import convert, search
from webapp.trajectories.models import Message, Trajectory

TRAJECTORIES = bulk.Table(Trajectory, convert.TRAJECTORY_COLUMNS)
MESSAGES = bulk.Table(Message, convert.MESSAGE_COLUMNS)
FRAME = 16  # items a reader pickles together
AHEAD = 32  # frames of each reader the writer holds before it asks for them: about 13 MB at most
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
                    list(MESSAGES.json_text(convert.message_values(record, 0))), search.document(record))


def processes() -> int:
    return max(1, int(getattr(settings, "NLAC_IMPORT_PROCESSES", 0) or min(4, os.cpu_count() or 1)))


def prepared_items(path: Path, fmt: str, source_model: str, *, legacy: bool, imported_from: str,
                   n: int | None = None) -> Iterator[Prepared]:
    """The file's items in order, prepared; by ``n`` reader processes when the file is big enough to gain."""
    n = processes() if n is None else n
    options = {"legacy": legacy, "source_format": fmt, "imported_from": imported_from}
    if n < 2 or not hasattr(os, "fork") or not sharded(fmt) or path.stat().st_size < PARALLEL_MIN_BYTES:
        for item in read(path, fmt, source_model=source_model):
            yield prepare(item, **options)
        return
    yield from _from_readers(path, fmt, source_model, n, options)


def _from_readers(path: Path, fmt: str, source_model: str, n: int, options: dict) -> Iterator[Prepared]:
    readers: list[tuple[int, object]] = []  # (pid, the pipe's read end)
    try:
        for k in range(n):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the reader: never returns, never runs the writer's cleanup (its database connection)
                os.close(read_fd)
                code = 1
                try:
                    with os.fdopen(write_fd, "wb") as out:
                        _reader(out, str(path), fmt, source_model, options, k, n)
                    code = 0
                finally:
                    os._exit(code)
            os.close(write_fd)
            readers.append((pid, os.fdopen(read_fd, "rb")))
        yield from _merged(readers)
    finally:
        for pid, pipe in readers:
            pipe.close()  # a reader still writing gets a broken pipe and ends
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # done already, or stuck: either way gone before the import returns
            os.waitpid(pid, 0)


class _Prefetch(threading.Thread):
    """Reads one reader's frames off its pipe as they come, up to AHEAD frames before the writer asks: the reader
    goes on parsing while the writer writes a batch (the read waits outside the GIL; unpickling is the writer's)."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.frames: queue.Queue[bytes | None] = queue.Queue(maxsize=AHEAD)
        self.stopping = False

    def run(self) -> None:
        try:
            while True:
                size = self.pipe.read(8)
                data = self.pipe.read(int.from_bytes(size, "little")) if len(size) == 8 else b""
                if not data:
                    break
                while not self._put(data):
                    if self.stopping:
                        return
        except (OSError, ValueError):  # the writer closed the pipe: it has stopped
            pass
        self._put(None)

    def _put(self, data: bytes | None) -> bool:
        try:
            self.frames.put(data, timeout=0.5)
            return True
        except queue.Full:
            return False


def _merged(readers: list[tuple[int, object]]) -> Iterator[Prepared]:
    """The readers' items in the file's order: item i comes from reader i mod n."""
    n = len(readers)
    fetchers = [_Prefetch(pipe) for _, pipe in readers]
    for fetcher in fetchers:
        fetcher.start()
    frames: list[list[Prepared]] = [[] for _ in range(n)]
    k = 0
    try:
        while True:
            if not frames[k]:
                data = fetchers[k].frames.get()
                if data is None:
                    raise RuntimeError(f"import reader {k} (pid {readers[k][0]}) ended without finishing")
                kind, payload = pickle.loads(data)
                if kind == "end":
                    return  # the reader whose turn it is has no more: the file is done
                if kind == "format-error":
                    raise FormatError(*payload)
                if kind == "failed":
                    raise ReaderFailed(*payload)
                frames[k] = payload[::-1]
            yield frames[k].pop()
            k = (k + 1) % n
    finally:
        for fetcher in fetchers:
            fetcher.stopping = True


def _send(out, message: tuple) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(len(data).to_bytes(8, "little"))
    out.write(data)


def _reader(out, path: str, fmt: str, source_model: str, options: dict, k: int, n: int) -> None:
    """One reader process: prepares its shard and pickles it to ``out``, then ("end", None) or the error."""
    import gc

    gc.disable()  # as in the writer (imports._no_cycle_collector): no cycles are made here
    frame: list[Prepared] = []
    try:
        for item in read(path, fmt, source_model=source_model, shard=Shard(k, n)):
            frame.append(prepare(item, **options))
            if len(frame) >= FRAME:
                _send(out, ("items", frame))
                frame = []
        message: tuple[str, object] = ("end", None)
    except FormatError as exc:
        message = ("format-error", (exc.path, exc.where, exc.message, exc.field))
    except BAD_INPUT as exc:
        message = ("failed", (type(exc).__name__, str(exc)))
    except Exception as exc:  # a bug, not bad input: the writer fails the import with it
        message = ("failed", (type(exc).__name__, f"import reader {k}: {exc}"))
    if frame:
        _send(out, ("items", frame))
    _send(out, message)
    out.flush()
