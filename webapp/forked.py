"""Work shared out over forked processes, its results taken back in order: what lets an import read, and an export
write, a big file on every core.

``in_order(n, work)`` forks ``n`` workers; worker ``k`` runs ``work(k, n, send)`` and calls ``send(part)`` for each of
its parts, in order. The parts come back round robin (worker 0's first, worker 1's first, ..., worker 0's second...)
until the worker whose turn it is has no more: so work that deals out blocks the same way (block ``i`` to worker
``i mod n``) comes back in the order one process would have made it.

A worker starts at once (forked, with everything imported), never returns into the caller's code, and leaves with
``os._exit``: the parent's database connections, inherited, are set aside and never closed by the child (closing
one would end the parent's session); a worker that needs the database opens its own. A prefetch thread per worker
holds up to ``ahead`` bytes of its parts, so workers go on while the parent is busy; memory is that per worker. A
worker that raises is a bug, not bad input (bad input is the work's to report, as a part): the parent raises
WorkerFailed, as it does for a worker that dies (killed, out of memory) or sends nothing for SILENCE_S seconds.
Workers are killed and reaped however the parent stops reading.

Forking copies only the calling thread: a lock another thread of the parent held at that moment stays held in the
child. The work done in workers here (parsing, hashing, encoding, a database connection of its own) takes none of
the parent's; the silence timeout bounds the wait should that ever be wrong.
"""

from __future__ import annotations

import collections
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

SILENCE_S = 600.0
Send = Callable[[Any], None]
_END = ("end", None)


class WorkerFailed(RuntimeError):
    pass


def available() -> bool:
    return hasattr(os, "fork")


def processes(setting: int) -> int:
    """How many workers a setting asks for: 0 means the machine's cores, at most 4."""
    return max(1, setting or min(4, os.cpu_count() or 1))


def in_order(n: int, work: Callable[[int, int, Send], None], ahead: int = 32 << 20) -> Iterator[Any]:
    workers: list[tuple[int, Any]] = []  # (pid, the pipe's read end)
    try:
        for k in range(n):
            read_fd, write_fd = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                os.close(read_fd)
                os.close(write_fd)
                raise
            if pid == 0:
                os.close(read_fd)
                _run(k, n, work, write_fd)  # never returns
            os.close(write_fd)
            workers.append((pid, os.fdopen(read_fd, "rb")))
        yield from _merged(workers, ahead)
    finally:
        for pid, _ in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # done already, or stuck: either way gone before we return
        for pid, pipe in workers:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            pipe.close()


def _run(k: int, n: int, work: Callable[[int, int, Send], None], fd: int) -> None:
    code = 1
    try:
        # Kept in this list until os._exit, so that no connection object of the parent's is ever collected (and
        # closed) here; the next query opens the worker's own.
        inherited = [(c, c.connection) for c in connections.all(initialized_only=True)]
        for conn, _ in inherited:
            conn.connection = None
        with os.fdopen(fd, "wb") as out:
            def send(part: Any) -> None:
                _write(out, ("part", part))
            try:
                work(k, n, send)
                _write(out, _END)
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
    caller's), holding up to ``ahead`` bytes of them before they are asked for (a part bigger than that alone); None
    once the pipe ends, whole or not. Bytes, not parts: a worker can then run well ahead of a caller that stops to
    write (a batch of 500 trajectories), however big or small its parts."""

    def __init__(self, pipe, ahead: int):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.ahead = ahead
        self.parts: collections.deque[bytes | None] = collections.deque()
        self.held = 0  # bytes in parts
        self.changed = threading.Condition()
        self.stopping = False

    def run(self) -> None:
        try:
            while True:
                size = self.pipe.read(8)
                if len(size) != 8:
                    break
                data = self.pipe.read(int.from_bytes(size, "little"))
                if len(data) != int.from_bytes(size, "little"):
                    break  # cut short: the worker died writing it
                if not self._put(data):
                    return
        except (OSError, ValueError):  # the caller closed the pipe: it has stopped
            pass
        finally:
            self._put(None)

    def _put(self, data: bytes | None) -> bool:
        """Waits for room however long the caller takes; False once the caller has stopped."""
        size = len(data) if data is not None else 0
        with self.changed:
            while self.parts and self.held + size > self.ahead:
                if self.stopping:
                    return False
                self.changed.wait(0.5)
            self.parts.append(data)
            self.held += size
            self.changed.notify_all()
        return True

    def get(self, timeout: float) -> bytes | None:
        """The next part; queue.Empty after ``timeout`` seconds without one."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.parts, timeout):
                raise queue.Empty
            data = self.parts.popleft()
            self.held -= len(data) if data is not None else 0
            self.changed.notify_all()
            return data


def _merged(workers: list[tuple[int, Any]], ahead: int) -> Iterator[Any]:
    fetchers = [_Prefetch(pipe, ahead) for _, pipe in workers]
    for fetcher in fetchers:
        fetcher.start()
    k = 0
    try:
        while True:
            try:
                data = fetchers[k].get(timeout=SILENCE_S)
            except queue.Empty:
                raise WorkerFailed(f"worker {k} (pid {workers[k][0]}) sent nothing for {SILENCE_S:.0f} s") from None
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
