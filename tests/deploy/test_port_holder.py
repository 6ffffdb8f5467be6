"""Defect 13: "Something is already listening" named no one; it names the process that holds the port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import embedded
import pytest

LISTENER = ("import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen();"
            "print(s.getsockname()[1], flush=True); time.sleep(600)")


@pytest.fixture
def holder():
    proc = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    yield proc, port
    proc.kill()
    proc.wait()


def test_it_names_the_pid_and_command_holding_the_port(holder):
    proc, port = holder

    with pytest.raises(SystemExit) as refused:
        embedded.refuse_if_listening("127.0.0.1", port)

    message = str(refused.value)
    assert f"127.0.0.1:{port}" in message
    assert f"pid {proc.pid} (" in message
    assert "socket.socket()" in message  # its command line
    assert "NLAC_PORT" in message


def test_it_starts_when_the_port_is_free():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    time.sleep(0.1)

    assert embedded.refuse_if_listening("127.0.0.1", port) is None
