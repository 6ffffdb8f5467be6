"""python -m nlac_core generate / convert-model, run as a user would, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run(*args):
    return subprocess.run([sys.executable, "-m", "nlac_core", *args], cwd=ROOT, capture_output=True, text=True)


def write_lines(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


@pytest.mark.slow
def test_it_writes_one_completion_per_line(tmp_path):
    source = write_lines(tmp_path / "in.jsonl", [
        {"id": "a", "messages": [{"role": "user", "content": "What is the capital of France?"}]},
        {"id": "b", "messages": [{"role": "user", "content": "Say hello."}]},
        {"id": "c", "messages": [{"role": "user", "content": "What is the capital of France?"}],
         "assistant_prefix": "The capital of France is"},
    ])
    out = run("generate", str(source), str(tmp_path / "out.jsonl"), "--max-new-tokens", "6", "--batch-size", "2",
              "--stop", ".")
    assert out.returncode == 0, out.stderr
    assert "wrote 3 completions" in out.stderr
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    assert rows[2]["completion"] == " Paris" and rows[2]["finish_reason"] == "stop"
    for row in rows:
        assert row["backend"] == "hf" and row["model"].endswith("smollm2-135m-instruct")
        assert row["sampling"] == {"max_new_tokens": 6, "temperature": 0.0, "top_p": 1.0, "seed": 0, "stop": ["."]}
        assert row["prompt_tokens"] > 0 and 0 < row["completion_tokens"] <= 6


def test_it_names_a_malformed_line_and_exits_2(tmp_path):
    source = write_lines(tmp_path / "in.jsonl", [
        {"messages": [{"role": "user", "content": "Hi"}]},
        {"messages": [{"role": "user", "content": "Hi"}]},
        '{"messages": [{"role": "user", "content": "Hi"}',
    ])
    out = run("generate", str(source), str(tmp_path / "out.jsonl"))
    assert out.returncode == 2
    assert "error: in.jsonl, line 3: not valid JSON" in out.stderr
    assert not (tmp_path / "out.jsonl").exists()

    write_lines(source, [{"messages": [{"role": "user", "content": "Hi"}]}, {"messages": "Hi"}])
    out = run("generate", str(source), str(tmp_path / "out.jsonl"))
    assert out.returncode == 2
    assert "error: in.jsonl, line 2, field 'messages': expected a non-empty list of messages" in out.stderr


def test_it_refuses_a_model_directory_that_does_not_exist(tmp_path):
    source = write_lines(tmp_path / "in.jsonl", [{"messages": [{"role": "user", "content": "Hi"}]}])
    out = run("generate", str(source), str(tmp_path / "out.jsonl"), "--model", str(tmp_path / "no-model"))
    assert out.returncode == 2
    assert f"--model {tmp_path / 'no-model'}: not a model directory" in out.stderr


def test_it_prints_the_converted_embedded_model_directory(embedded_model_dir):
    out = run("convert-model")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(embedded_model_dir)


@pytest.mark.slow
def test_it_converts_the_wheels_gguf_into_a_fresh_directory_that_loads_and_generates(tmp_path, embedded_backend):
    """The conversion itself (the session's model directory was converted long ago): GGUF -> safetensors,
    refused over an existing model without --force, and the result generates what the cached one does."""
    from nlac_core.backends.base import SamplingSpec
    from nlac_core.backends.hf import HFBackend
    from nlac_core.checkpoints import read_manifest

    target = tmp_path / "converted"
    out = run("convert-model", "--out", str(target))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(target)
    assert (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary directory left
    assert read_manifest(target).base_model == "smollm2-135m-instruct"
    out = run("convert-model", "--out", str(target))
    assert out.returncode == 2 and "a model is already there (use --force to replace it)" in out.stderr
    messages = [[{"role": "user", "content": "Name a fruit that is yellow."}]]
    spec = SamplingSpec(max_new_tokens=12)
    assert HFBackend(model=str(target)).generate(messages, spec) == embedded_backend.generate(messages, spec)
