"""Defect 13: Ctrl-C on `make run` left a gunicorn worker holding the port for 40 minutes. Stopping ends every
child's whole process group within the bound, including a worker that ignores SIGTERM after its master is gone."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from processes import Supervisor, group_members

# A master (like gunicorn's arbiter) that starts a worker ignoring SIGTERM and SIGINT, then dies on SIGTERM
# itself, leaving the worker behind unless its whole group is killed.
MASTER = textwrap.dedent("""
    import signal, subprocess, sys, time
    worker = subprocess.Popen([sys.executable, "-c",
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        "signal.signal(signal.SIGINT, signal.SIG_IGN); open(sys.argv[1], 'w').write('ready'); time.sleep(600)",
        sys.argv[1]])
    open(sys.argv[2], "w").write(str(worker.pid))
    time.sleep(600)
""")
STUBBORN = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            "open(sys.argv[1], 'w').write('x'); time.sleep(600)")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_for(path: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.05)


@pytest.fixture
def supervisor():
    children = Supervisor(stop_within_s=2)
    yield children
    for _, proc in children.children:  # a failed test must not leave its processes behind
        for pid in group_members(proc.pid):
            os.kill(pid, signal.SIGKILL)


def test_it_kills_a_worker_that_ignores_sigterm_after_its_master_died(supervisor, tmp_path):
    master = supervisor.start("web", [sys.executable, "-c", MASTER, str(tmp_path / "ready"), str(tmp_path / "pid")])
    wait_for(tmp_path / "ready")
    wait_for(tmp_path / "pid")
    worker = int((tmp_path / "pid").read_text())
    assert alive(worker)

    started = time.monotonic()
    killed = supervisor.stop(report=lambda _: None)

    assert time.monotonic() - started < 2 + 3, "stopping took longer than its bound"
    assert killed == ["web"]
    assert master.returncode is not None
    assert not alive(worker), "the worker outlived `make run`"
    assert group_members(master.pid) == []


def test_it_kills_every_child_that_ignores_sigterm_within_the_bound(supervisor, tmp_path):
    procs = [supervisor.start(name, [sys.executable, "-c", STUBBORN, str(tmp_path / name)])
             for name in ("redis", "worker")]
    for name in ("redis", "worker"):
        wait_for(tmp_path / name)

    started = time.monotonic()
    supervisor.stop(report=lambda _: None)

    assert time.monotonic() - started < 2 + 3
    assert all(p.returncode == -signal.SIGKILL for p in procs)


def test_it_lets_children_that_obey_sigterm_stop_by_themselves(supervisor, tmp_path):
    proc = supervisor.start("worker", [sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(0.3)

    assert supervisor.stop(report=lambda _: None) == []
    assert proc.returncode == -signal.SIGTERM


def test_it_keeps_ctrl_c_away_from_the_children(supervisor, tmp_path):
    """Each child is in a session of its own: the terminal's SIGINT reaches only `make run`, which then stops
    them in order, instead of every process deciding alone how to die."""
    proc = supervisor.start("worker", [sys.executable, "-c", "import time; time.sleep(600)"])

    assert os.getsid(proc.pid) == proc.pid != os.getsid(0)
    assert os.getpgid(proc.pid) == proc.pid
