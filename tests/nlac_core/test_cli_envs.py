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
    # the first problem of the held-out test half (the default split of evaluate)
    assert record.task.external_id == "test/intermediate_algebra/1994.json" and record.meta["env"] == "math"
    assert record.task.split == "test"


@pytest.mark.slow
def test_it_rolls_out_twenty_questions_into_an_importable_jsonl(tmp_path):
    episodes = tmp_path / "games.jsonl"
    out = run("rollout", "--env", "twenty_questions", "--tasks", "2", "--trials", "2", "--max-turns", "2",
              "--max-new-tokens", "12", "--temperature", "0.7", "--seed", "1", "--out", str(episodes))
    assert out.returncode == 0, out.stderr
    assert f"wrote 4 trajectories to {episodes}" in out.stderr and "winrate:" in out.stderr
    records = list(read_trajectories(episodes))
    assert [(r.task.external_id, r.trial) for r in records] == [("Basketball", 0), ("Basketball", 1), ("Cat", 0),
                                                                 ("Cat", 1)]
    assert all(r.meta["env"] == "twenty_questions" and 1 <= r.meta["turns"] <= 2 for r in records)
    assert all(r.meta["env_llm"]["mode"] == "loglikelihood" and r.meta["policy_backend"] == "hf" for r in records)
    assert records[0].meta["trial_seed"] != records[1].meta["trial_seed"]
    assert not list(tmp_path.glob("*.part"))
