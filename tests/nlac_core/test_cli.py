"""python -m nlac_core, run as a user would, in a subprocess (no Django anywhere)."""

import subprocess
import sys

from nlac_core.formats import nlac_jsonl, read
from tests.conftest import ROOT, TAU2_GROK, TAU_GPT4O, needs_shared

pytestmark = needs_shared


def run(*args):
    return subprocess.run([sys.executable, "-m", "nlac_core", *args], cwd=ROOT, capture_output=True, text=True)


def test_it_prints_the_stats_of_a_run_with_pass_hat_k():
    out = run("stats", str(TAU_GPT4O))
    assert out.returncode == 0, out.stderr
    assert "trajectories: 200  tasks: 50  messages: 5308" in out.stdout
    assert "assistant 2454, system 200, tool 1164, user 1490" in out.stdout
    assert "pass^k: k=1 0.420  k=2 0.273  k=3 0.220  k=4 0.200" in out.stdout


def test_it_converts_any_format_to_our_jsonl(tmp_path):
    out_path = tmp_path / "tau2.jsonl"
    out = run("convert", str(TAU2_GROK), str(out_path))
    assert out.returncode == 0 and "wrote 20 trajectories" in out.stderr
    converted = [i.record for i in read(out_path)]
    assert converted == [i.record for i in read(TAU2_GROK) if hasattr(i.record, "messages")]
    assert out_path.read_text().splitlines()[0] == nlac_jsonl.dumps(converted[0])


def test_it_exits_2_with_the_place_of_an_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": 1}]}\n')
    out = run("stats", str(bad))
    assert out.returncode == 2
    assert "error: bad.jsonl, line 1, field 'messages[0].role': expected a string, got an integer" in out.stderr
