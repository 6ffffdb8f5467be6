"""python -m nlac_core train / ema-update / ema-init, run as a user would, in a subprocess."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.nlac_core.sft_helpers import records
from tests.nlac_core.test_ema import tiny


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "nlac_core", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env=env)


def dataset(tmp_path, rows):
    path = tmp_path / "data.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("rows, message", [
    ([records()[0], "{broken"], "error: data.jsonl, line 2: not valid JSON"),
    ([], "error: " + "{tmp}/data.jsonl: the dataset is empty (no records)"),
    ([records()[0], {"prompt": [{"role": "user", "content": "hi"}]}],
     "error: data.jsonl, line 2, field 'completion': missing"),
    ([{"prompt": [{"role": "user", "content": "hi"}], "completion": "hello"}],
     "error: data.jsonl, line 1, field 'completion': expected a non-empty list of chat messages, got a string"),
])
def test_it_exits_2_naming_the_line_of_a_bad_dataset(tmp_path, rows, message):
    out = run("train", dataset(tmp_path, rows), "--out", tmp_path / "ckpt")
    assert out.returncode == 2, out.stderr
    assert message.format(tmp=tmp_path) in out.stderr
    assert not (tmp_path / "ckpt").exists()


def test_it_exits_2_for_a_missing_dataset_bad_model_dir_or_bad_config(tmp_path):
    out = run("train", tmp_path / "nope.jsonl", "--out", tmp_path / "ckpt")
    assert out.returncode == 2 and "nope.jsonl: no such dataset file" in out.stderr
    data = dataset(tmp_path, records())
    out = run("train", data, "--out", tmp_path / "ckpt", "--base-model", tmp_path)
    assert out.returncode == 2
    assert f"error: --base-model {tmp_path}: not a model directory (no config.json)" in out.stderr
    out = run("train", data, "--out", tmp_path / "ckpt", "--lr", "-1")
    assert out.returncode == 2 and "SFTRunConfig.learning_rate: must be a positive number, got -1.0" in out.stderr
    (tmp_path / "config.json").write_text('{"max_stpes": 3}')
    out = run("train", data, "--out", tmp_path / "ckpt", "--config", tmp_path / "config.json")
    assert out.returncode == 2 and "unknown field(s) 'max_stpes'" in out.stderr
    assert not (tmp_path / "ckpt").exists()


def test_it_averages_checkpoints_from_the_command_line(tmp_path):
    tiny(tmp_path / "target", 1)
    tiny(tmp_path / "online", 2)
    out = run("ema-update", "--target", tmp_path / "target", "--online", tmp_path / "online", "--tau", "0.5",
              "--out", tmp_path / "next")
    assert out.returncode == 0, out.stderr
    assert f"ema target: {tmp_path / 'next'} (tau 0.5)" in out.stdout
    assert json.loads((tmp_path / "next" / "nlac_manifest.json").read_text())["kind"] == "ema-target"
    out = run("ema-update", "--target", tmp_path / "target", "--online", tmp_path / "online", "--tau", "2")
    assert out.returncode == 2 and "error: tau must be a number in [0, 1], got 2.0" in out.stderr
    out = run("ema-update", "--target", tmp_path / "missing", "--online", tmp_path / "online", "--tau", "0.1")
    assert out.returncode == 2 and f"error: --target {tmp_path / 'missing'}: not a model directory" in out.stderr
    out = run("ema-init", "--online", tmp_path / "online", "--target", tmp_path / "fresh")
    assert out.returncode == 0 and (tmp_path / "fresh" / "model.safetensors").is_file()


@pytest.mark.slow
def test_it_trains_from_the_command_line_and_prints_progress_and_metrics(tmp_path, embedded_model_dir):
    out = run("train", dataset(tmp_path, records()), "--out", tmp_path / "ckpt", "--base-model", embedded_model_dir,
              "--max-steps", "1", "--max-length", "128", "--lr", "1e-4", "--kind", "critic")
    assert out.returncode == 0, out.stderr
    assert "step 1/1  loss " in out.stderr
    assert f"checkpoint: {tmp_path / 'ckpt'}" in out.stdout and "steps: 1/1  train_loss: " in out.stdout
    manifest = json.loads((tmp_path / "ckpt" / "nlac_manifest.json").read_text())
    assert manifest["kind"] == "critic" and manifest["config"]["max_length"] == 128
