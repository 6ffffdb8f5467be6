"""webapp/forked.py: parts of forked workers come back round robin; a worker that raises, dies or is killed fails the
caller at once (never a hang, even with its queue full); a caller that stops early leaves no worker behind."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from webapp import forked


@pytest.fixture(autouse=True)
def nothing_left():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def blocks(k: int, n: int, send) -> None:
    for i in range(k, 10, n):  # block i is worker i mod n's
        send(list(range(i * 3, i * 3 + 3)))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_it_gives_the_parts_back_in_order(n):
    assert [x for part in forked.in_order(n, blocks) for x in part] == list(range(30))


def test_it_fails_when_a_worker_raises():
    def work(k, n, send):
        send(k)
        if k == 1:
            raise KeyError("oops")
        send(k + n)

    with pytest.raises(forked.WorkerFailed, match="(?s)worker 1 of 2: .*KeyError: 'oops'"):
        list(forked.in_order(2, work))


def test_it_fails_at_once_when_a_worker_is_killed_with_its_queue_full():
    def work(k, n, send):
        for i in range(1000):
            send(b"x" * 1000)
            if k == 1 and i == 50:
                os.kill(os.getpid(), signal.SIGKILL)  # dies after filling its queue, without an end

    started = time.monotonic()
    parts = forked.in_order(2, work, ahead=4)
    next(parts)
    time.sleep(1)  # worker 1's queue fills, then it dies
    with pytest.raises(forked.WorkerFailed, match="worker 1 .* ended without finishing"):
        list(parts)
    assert time.monotonic() - started < 30


def test_it_leaves_no_worker_when_the_caller_stops_early():
    def endless(k, n, send):
        while True:
            send(k)

    parts = forked.in_order(3, endless, ahead=2)
    assert [next(parts) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    parts.close()  # the autouse fixture checks that the three are gone


def test_it_lets_a_worker_run_ahead_by_bytes_and_no_further(tmp_path):
    """A caller that stops (to write a batch) finds up to ``ahead`` bytes of each worker's parts waiting, and the
    worker held back past that: parts of 100 kB, 1 MB ahead, so about ten (and one on its way in the pipe)."""
    sent = tmp_path / "sent"

    def work(k, n, send):
        for i in range(100):
            send(b"x" * 100_000)
            sent.write_text(str(i + 1))

    parts = forked.in_order(1, work, ahead=1_000_000)
    next(parts)
    time.sleep(1.5)
    assert 9 <= int(sent.read_text()) <= 14
    assert sum(1 for _ in parts) == 99
