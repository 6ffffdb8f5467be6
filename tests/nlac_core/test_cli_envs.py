"""``python -m nlac_core rollout / evaluate``, run as a user would, in a subprocess."""

import json
import subprocess
import sys
import time

import pytest

from nlac_core.rollout import read_trajectories
from tests.conftest import ROOT, needs_shared

pytestmark = needs_shared


def run(*args):
    return subprocess.run([sys.executable, "-m", "nlac_core", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("args, message", [
    (("rollout", "--env", "math", "--tasks", "0", "--out", "x.jsonl"), "error: --tasks must be at least 1, got 0"),
    (("evaluate", "--env", "twenty_questions", "--trials", "-2"), "error: --trials must be at least 1, got -2"),
    (("evaluate", "--env", "twenty_questions", "--split", "dev"),
     "error: twenty_questions: unknown split 'dev'; known: all, train, test"),
    (("evaluate", "--env", "tool_use", "--data", "/nowhere/mock"),
     "error: tau2-bench mock domain not found: /nowhere/mock"),
    (("evaluate", "--env", "chess"), "argument --env: invalid choice: 'chess'"),
    (("rollout", "--env", "math"), "the following arguments are required: --out"),
])
def test_it_rejects_a_bad_argument_before_loading_a_model(args, message):
    started = time.perf_counter()
    out = run(*args)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and time.perf_counter() - started < 30


@pytest.mark.slow
def test_it_evaluates_the_embedded_model_and_writes_metrics_and_trajectories(tmp_path):
    metrics, episodes = tmp_path / "math.json", tmp_path / "math.jsonl"
    out = run("evaluate", "--env", "math", "--tasks", "1", "--max-new-tokens", "24", "--json", str(metrics),
              "--out", str(episodes))
    assert out.returncode == 0, out.stderr
    assert "env: math  tasks: 1  episodes: 1  scored: 1" in out.stdout
    data = json.loads(metrics.read_text())
    assert data["n_episodes"] == 1 and data["meta"]["sampling"]["max_new_tokens"] == 24
    record, = read_trajectories(episodes)
    assert record.task.external_id == "test/precalculus/807.json" and record.meta["env"] == "math"
