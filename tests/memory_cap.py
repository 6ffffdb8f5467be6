"""Run code under a cap on this process's address space, so that a parser that would take gigabytes fails the
test with MemoryError instead of taking the shared machine down with it."""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Iterator

MiB = 1 << 20


def address_space() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


@contextlib.contextmanager
def at_most_extra(mib: int) -> Iterator[None]:
    """The code inside may map at most ``mib`` MiB more than the process holds now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (address_space() + mib * MiB, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def nested(depth: int) -> str:
    """``depth`` arrays, each inside the last: the shape that made the streaming parser quadratic."""
    return "[" * depth + "]" * depth
