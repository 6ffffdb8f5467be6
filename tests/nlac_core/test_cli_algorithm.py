"""critique / backup / refine / build-dataset from the command line, as a researcher runs them."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, TAU_GPT4O, needs_shared

pytestmark = needs_shared


def run(*args):
    return subprocess.run([sys.executable, "-m", "nlac_core", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)


def test_it_names_the_bad_argument_or_file(tmp_path):
    out = run("critique", tmp_path / "missing.json", tmp_path / "o.jsonl")
    assert out.returncode == 2 and "missing.json" in out.stderr
    out = run("critique", TAU_GPT4O, tmp_path / "o.jsonl", "--steps", "middle", "--limit", "1")
    assert out.returncode == 2 and "--steps 'middle'" in out.stderr
    out = run("critique", TAU_GPT4O, tmp_path / "o.jsonl", "--limit", "1", "--k", "2")
    assert out.returncode == 2 and "need sampling" in out.stderr
    out = run("critique", TAU_GPT4O, tmp_path / "o.jsonl", "--limit", "1", "--model", tmp_path)
    assert out.returncode == 2 and "not a model directory" in out.stderr
    bad = tmp_path / "critiques.jsonl"
    bad.write_text('{"type": "Critique"}\nnot json\n')
    out = run("refine", TAU_GPT4O, bad, tmp_path / "r.jsonl")
    assert out.returncode == 2 and "critiques.jsonl, line 1: not a valid Critique record" in out.stderr
    bad.write_text('{"type": "Refinement"}\n')
    out = run("build-dataset", "successor", bad, tmp_path / "d.jsonl", "--trajectories", TAU_GPT4O)
    assert out.returncode == 2 and "line 1: expected a BellmanTarget record, got 'Refinement'" in out.stderr
    assert not (tmp_path / "d.jsonl").exists() and not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("args, message", [
    (("critique", TAU_GPT4O, "o.jsonl", "--limit", "0"), "error: --limit must be at least 1, got 0"),
    (("backup", TAU_GPT4O, "o.jsonl", "--limit", "-3"), "error: --limit must be at least 1, got -3"),
    (("critique", TAU_GPT4O, "o.jsonl", "--limit", "1", "--max-steps", "0"), "error: --max-steps must be at least 1"),
    (("critique", TAU_GPT4O, "o.jsonl", "--limit", "1", "--chunk-size", "0"), "chunk_size must be at least 1"),
    (("refine", TAU_GPT4O, "c.jsonl", "o.jsonl", "--chunk-size", "0"), "error: --chunk-size must be at least 1"),
])
def test_it_refuses_counts_below_one_without_a_traceback(tmp_path, args, message):
    out = subprocess.run([sys.executable, "-m", "nlac_core", *map(str, args)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.slow
def test_it_chains_critique_refine_backup_and_dataset_building(tmp_path):
    common = ["--limit", "1", "--steps", "2", "--max-state-chars", "800"]
    out = run("critique", TAU_GPT4O, tmp_path / "critiques.jsonl", *common)
    assert out.returncode == 0, out.stderr
    assert "wrote 1 critiques (1 parsed, 0 kept as raw text)" in out.stderr
    [row] = [json.loads(line) for line in (tmp_path / "critiques.jsonl").read_text().splitlines()]
    assert row["type"] == "Critique" and row["step"]["step_index"] == 2 and row["verdict"]

    out = run("refine", TAU_GPT4O, tmp_path / "critiques.jsonl", tmp_path / "refined.jsonl",
              "--max-state-chars", "800")
    assert out.returncode == 0, out.stderr
    assert "wrote 1 refinements" in out.stderr
    out = run("backup", TAU_GPT4O, tmp_path / "targets.jsonl", *common, "--next-action", "data")
    assert out.returncode == 0, out.stderr
    assert "wrote 1 Bellman targets (0 terminal)" in out.stderr

    out = run("build-dataset", "successor", tmp_path / "targets.jsonl", tmp_path / "critic.jsonl",
              "--trajectories", TAU_GPT4O)
    assert out.returncode == 0, out.stderr
    [record] = [json.loads(line) for line in (tmp_path / "critic.jsonl").read_text().splitlines()]
    assert record["completion"][0]["content"].startswith("FUTURE: After this action,")
    assert record["provenance"]["kind"] == "bellman_target"
