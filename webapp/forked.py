"""Work shared out over forked processes, its results taken back in order: what lets an import read, and an export
write, a big file on every core.

``in_order(n, work)`` forks ``n`` workers; worker ``k`` runs ``work(k, n, send)`` and calls ``send(part)`` for each of
its parts, in order. The parts come back round robin (worker 0's first, worker 1's first, ..., worker 0's second...)
until the worker whose turn it is has no more: so work that deals out blocks the same way (block ``i`` to worker
``i mod n``) comes back in the order one process would have made it.

A worker starts at once (forked, with everything imported), never returns into the caller's code, and leaves with
``os._exit``: the parent's database connection, inherited, is set aside and never closed by the child (closing it
would end the parent's session); a worker that needs the database opens its own. A prefetch thread per worker
holds up to AHEAD parts, so workers go on while the parent is busy. A worker that raises is a bug, not bad input
(bad input is the work's to report, as a part): the parent raises WorkerFailed. Workers are killed, and reaped,
however the parent stops reading.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connections

AHEAD = 32
Send = Callable[[Any], None]


class WorkerFailed(RuntimeError):
    pass


def available() -> bool:
    return hasattr(os, "fork")


def in_order(n: int, work: Callable[[int, int, Send], None]) -> Iterator[Any]:
    workers: list[tuple[int, Any]] = []  # (pid, the pipe's read end)
    try:
        for k in range(n):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _run(k, n, work, write_fd)  # never returns
            os.close(write_fd)
            workers.append((pid, os.fdopen(read_fd, "rb")))
        yield from _merged(workers)
    finally:
        for pid, pipe in workers:
            pipe.close()  # a worker still writing gets a broken pipe
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # done already, or stuck: either way gone before we return
            os.waitpid(pid, 0)


def _run(k: int, n: int, work: Callable[[int, int, Send], None], fd: int) -> None:
    code = 1
    try:
        inherited = [(c, c.connection) for c in connections.all(initialized_only=True)]
        for conn, _ in inherited:
            conn.connection = None  # the next query opens the worker's own; the parent's is kept, never closed
        with os.fdopen(fd, "wb") as out:
            def send(part: Any) -> None:
                _write(out, ("part", part))
            try:
                work(k, n, send)
                _write(out, ("end", None))
            except Exception:  # noqa: BLE001 - a bug in the work: the parent says what it was
                _write(out, ("failed", f"worker {k} of {n}: {traceback.format_exc(limit=-3)}"))
        code = 0
    finally:
        os._exit(code)


def _write(out, message: tuple[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(len(data).to_bytes(8, "little"))
    out.write(data)


class _Prefetch(threading.Thread):
    """Reads one worker's parts off its pipe as they come (the read waits outside the GIL; unpickling is the
    caller's), up to AHEAD before they are asked for."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.parts: queue.Queue[bytes | None] = queue.Queue(maxsize=AHEAD)
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
        except (OSError, ValueError):  # the caller closed the pipe: it has stopped
            pass
        self._put(None)

    def _put(self, data: bytes | None) -> bool:
        try:
            self.parts.put(data, timeout=0.5)
            return True
        except queue.Full:
            return False


def _merged(workers: list[tuple[int, Any]]) -> Iterator[Any]:
    fetchers = [_Prefetch(pipe) for _, pipe in workers]
    for fetcher in fetchers:
        fetcher.start()
    k = 0
    try:
        while True:
            data = fetchers[k].parts.get()
            if data is None:
                raise WorkerFailed(f"worker {k} (pid {workers[k][0]}) ended without finishing")
            kind, part = pickle.loads(data)
            if kind == "end":
                return
            if kind == "failed":
                raise WorkerFailed(part)
            yield part
            k = (k + 1) % len(workers)
    finally:
        for fetcher in fetchers:
            fetcher.stopping = True
