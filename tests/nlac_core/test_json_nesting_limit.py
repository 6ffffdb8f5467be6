"""JSON nested deeper than MAX_DEPTH levels is refused by every reader, naming the record, in flat memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from nlac_core.formats import FormatError, read
from nlac_core.formats.base import MAX_DEPTH
from tests.conftest import ROOT
from tests.memory_cap import MiB, at_most_extra, nested

DEEP = 100_000
TOO_DEEP = f"JSON nested too deeply (more than {MAX_DEPTH} levels)"


def files(nest: str) -> dict[str, tuple[str, str, str]]:
    """Per format: file name, text holding ``nest`` inside one record, and the place the error names."""
    return {
        "tau-bench": ("run.json", '[{"task_id": 1, "reward": 0, "info": {}, "traj": []},\n'
                                  '{"task_id": 2, "reward": 0, "info": {"task": {"deep": ' + nest + '}}, "traj": []}]',
                      "run.json, record 1, field 'info.task.deep"),
        "tau2-bench": ("tau2.json", '{"info": {}, "tasks": [], "simulations": [{"task_id": "1", "messages": []}, '
                                    '{"task_id": "1", "messages": [], "extra": ' + nest + '}]}',
                       "tau2.json, simulation 1, field 'simulations[1].extra"),
        "inspect-ai": ("log.json", '{"eval": {"run_id": "r", "model": "m"}, "samples": [{"id": 1, "messages": [], '
                                   '"input": "x", "metadata": ' + nest + '}]}',
                       "log.json, sample 0, field 'samples[0].metadata"),
        "swe-agent": ("run.traj", '{"history": [], "trajectory": [], "info": {"deep": ' + nest + '}}',
                      "run.traj, trajectory"),
        "openai-jsonl": ("runs.jsonl", '{"messages": []}\n{"messages": [], "metadata": {"deep": ' + nest + '}}\n',
                         "runs.jsonl, line 2"),
    }


@pytest.mark.parametrize("fmt", list(files("")))
def test_it_refuses_a_100000_level_record_in_flat_memory(tmp_path, fmt):
    name, text, place = files(nested(DEEP))[fmt]
    path = tmp_path / name
    path.write_text(text)
    with at_most_extra(150), pytest.raises(FormatError) as caught:
        list(read(path))
    assert str(caught.value).startswith(place), caught.value
    assert TOO_DEEP in str(caught.value)


@pytest.mark.parametrize("fmt", list(files("")))
def test_it_reads_the_limit_and_refuses_one_level_more(tmp_path, fmt):
    """The record is level 1: its object, the field's object, then the arrays."""
    name, _, _ = files("")[fmt]
    levels_above = {"tau-bench": 3, "tau2-bench": 1, "inspect-ai": 1, "swe-agent": 2, "openai-jsonl": 2}[fmt]
    path = tmp_path / name
    path.write_text(files(nested(MAX_DEPTH - levels_above))[fmt][1])
    assert list(read(path))
    path.write_text(files(nested(MAX_DEPTH - levels_above + 1))[fmt][1])
    with pytest.raises(FormatError, match=r"nested too deeply \(more than 512 levels\)"):
        list(read(path))


def run_capped(folder, *args: str) -> tuple[int, str, int]:
    """``python -m nlac_core ARGS`` with its address space capped at 4 GiB: (exit code, stderr, peak RSS bytes)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (4096 * MiB, 4096 * MiB))

    err_path = folder / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "nlac_core", *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=err, preexec_fn=cap)
        _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), err_path.read_text(), usage.ru_maxrss * 1024


@pytest.mark.parametrize("command", ["stats", "convert"])
def test_it_refuses_a_100000_level_file_on_the_command_line_in_flat_memory(tmp_path, command):
    name, text, place = files(nested(DEEP))["tau-bench"]
    deep = tmp_path / name
    deep.write_text(text)
    small = tmp_path / "small.json"
    small.write_text(files("[]")["tau-bench"][1])
    out = [str(tmp_path / "out.jsonl")] if command == "convert" else []
    code, _, baseline = run_capped(tmp_path, command, str(small), *out)
    assert code == 0
    code, stderr, peak = run_capped(tmp_path, command, str(deep), *out)
    assert code == 2, stderr
    assert f"error: {place}" in stderr and TOO_DEEP in stderr
    assert peak - baseline < 100 * MiB, f"{(peak - baseline) / MiB:.0f} MiB more than for a small file"


@pytest.mark.parametrize("fmt", ["tau-bench", "openai-jsonl"])
def test_it_reads_a_wide_record_under_a_long_key_in_flat_memory(tmp_path, fmt):
    """Width, not depth: a 1 MiB key over 2,000 children. Spelling each child's path up front (key length x
    children) took gigabytes; paths are spelled only for an error now."""
    wide = '{"' + "k" * MiB + '": [' + ",".join(["{}"] * 2000) + "]}"
    name, text, _ = files(wide)[fmt]
    path = tmp_path / name
    path.write_text(text)
    with at_most_extra(150):
        assert len(list(read(path))) == 2


def test_it_names_a_bad_number_under_a_long_key_with_a_short_field(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text('{"messages": [], "metadata": {"' + "k" * 5000 + '": [1.5, NaN]}}\n')
    with pytest.raises(FormatError) as caught:
        list(read(path))
    message = str(caught.value)
    assert "runs.jsonl, line 1, field 'metadata.kkkk" in message and "is not a number a database can store" in message
    assert len(message) < 300
