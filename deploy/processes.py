"""The children of `make run` (Redis, the Celery worker, gunicorn), and who holds a port.

Each child starts in a session and process group of its own, so that Ctrl-C reaches only `make run`, which
then stops every group itself: SIGTERM to the whole group (gunicorn's workers and Celery's pool are in the
group of their master), a wait of at most ``STOP_WITHIN_S``, then SIGKILL to whatever is left of the group.
A master that dies first can no longer orphan a worker that keeps the port: the group is killed, not the
master. Linux only, like the rest of `make run` (it reads /proc).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

STOP_WITHIN_S = float(os.environ.get("NLAC_STOP_WITHIN_S", "10"))
PROC = Path("/proc")


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    if not PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ")".
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


class Supervisor:
    """Starts named children, notices the first to exit, and stops them all within a bound."""

    def __init__(self, stop_within_s: float = STOP_WITHIN_S):
        self.stop_within_s = stop_within_s
        self.children: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], **popen_kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(argv, start_new_session=True, **popen_kwargs)
        self.children.append((name, proc))
        return proc

    def first_exited(self) -> tuple[str, int] | None:
        for name, proc in self.children:
            if proc.poll() is not None:
                return name, proc.returncode
        return None

    def stop(self, report=print) -> list[str]:
        """Ends every child's group; returns the names that had to be killed. Safe to call twice."""
        groups = [(name, proc, proc.pid) for name, proc in reversed(self.children)]  # pgid == pid (own session)
        for _, _, pgid in groups:
            _signal_group(pgid, signal.SIGTERM)
        _wait_until_gone(groups, self.stop_within_s)
        killed = [name for name, _, pgid in groups if group_members(pgid)]
        for name, _, pgid in groups:
            if name in killed:
                _signal_group(pgid, signal.SIGKILL)
        _wait_until_gone(groups, 5)  # SIGKILL is delivered asynchronously; only a process stuck in the kernel waits
        for name, proc, pgid in groups:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)  # reap it: it may have died just after the last poll
            if group_members(pgid):
                report(f"{name} (process group {pgid}) did not die even after SIGKILL")
            else:
                report(f"stopped {name}" + (f" (killed after {self.stop_within_s:g} s)" if name in killed else ""))
        self.children.clear()
        return killed


def _wait_until_gone(groups, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        for _, proc, _ in groups:
            proc.poll()  # reap our own children so that they do not linger as zombies
        if not any(group_members(pgid) for _, _, pgid in groups) or time.monotonic() >= deadline:
            return
        time.sleep(0.1)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# -- who holds a port -------------------------------------------------------------------------------------------

def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # sl local_address rem_address st ... inode: st 0A is LISTEN; the port is hex after the colon.
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _command(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "?"


def port_holders(port: int) -> list[tuple[int, str]]:
    """(pid, command line) of each process with a listening socket on the port, as far as we may see."""
    sockets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    holders = []
    if sockets:
        for entry in PROC.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fds = list((entry / "fd").iterdir())
            except OSError:  # another user's process, or gone
                continue
            for fd in fds:
                try:
                    if os.readlink(fd) in sockets:
                        holders.append((int(entry.name), _command(int(entry.name))))
                        break
                except OSError:
                    continue
    if not holders and shutil.which("ss"):
        holders = _holders_from_ss(port)
    return sorted(holders)


def _holders_from_ss(port: int) -> list[tuple[int, str]]:
    try:
        out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted({(int(pid), _command(int(pid))) for pid in re.findall(r"pid=(\d+)", out)})


def describe_port_holders(port: int) -> str:
    holders = port_holders(port)
    if not holders:
        return "a process this user cannot see (`sudo ss -ltnp` names it)"
    return "; ".join(f"pid {pid} ({command})" for pid, command in holders)
