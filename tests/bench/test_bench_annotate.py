"""The keyboard-only annotator of ``bench/bench_annotate.py`` cannot rot: ``--keyboard-only --quick`` logs in to a real
gunicorn in chromium, finishes a 5-item queue with the keyboard alone, prints seconds per item, and checks every
verdict and typed sentence against the database (it exits non-zero otherwise)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest

from tests.browser.conftest import CHROMIUM
from tests.conftest import ROOT, needs_shared

pytestmark = [pytest.mark.browser, needs_shared]


def test_it_times_a_keyboard_only_annotator_through_a_queue(tmp_path):
    if not os.path.exists(CHROMIUM):
        if os.environ.get("NLAC_REQUIRE_BROWSER"):
            pytest.fail(f"no chromium at {CHROMIUM} and NLAC_REQUIRE_BROWSER is set")
        pytest.skip(f"no chromium at {CHROMIUM}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'annotate.sqlite3'}", "NLAC_BENCH_PORT": str(port),
           "DJANGO_SETTINGS_MODULE": "webapp.settings"}
    done = subprocess.run([sys.executable, "bench/bench_annotate.py", "--keyboard-only", "--quick"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = re.search(r"keyboard-only annotator, (\d+) items in Chromium .*: median ([\d.]+) s/item", done.stdout)
    assert line and int(line[1]) == 5 and float(line[2]) > 0, done.stdout
    assert "5 finished assignments, 5 new revisions" in done.stdout and "all as typed" in done.stdout
