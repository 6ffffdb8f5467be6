"""Files built to break the importer: each fails with its place named, and changes nothing."""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.conftest import INSPECT_EVAL, TAU2_GROK, needs_shared
from tests.memory_cap import at_most_extra, nested
from webapp.trajectories.models import ImportBatch, Message, Task, Trajectory
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = pytest.mark.django_db

OK_LINE = json.dumps({"messages": [{"role": "user", "content": "fine"}]})


def line(**fields) -> str:
    return json.dumps({"messages": [{"role": "user", "content": "x"}], **fields})


JSONL_CASES = {
    "nested too deeply": ("[" * 100_000 + "]" * 100_000, "line 2: JSON nested too deeply"),
    "a 5,000-digit integer": ('{"messages": [], "reward": ' + "9" * 5000 + "}",
                              "line 2, field 'reward': an integer of 5000 digits is out of range"),
    "an infinite reward": ('{"messages": [], "reward": 1e400}', "line 2, field 'reward': inf is not a number"),
    "a reward beyond floats": ('{"messages": [], "reward": 1' + "0" * 400 + "}",
                               "line 2, field 'reward': number out of range"),
    "NaN in metadata": ('{"messages": [], "metadata": {"x": NaN}}', "line 2, field 'metadata.x': nan is not a number"),
    "a 40-bit trial": (line(metadata={"trial": 2**40}), "line 2, field 'metadata.trial': integer out of range"),
    "a 300-character task id": (line(metadata={"task_id": "t" * 300}),
                                "line 2, field 'task_id': longer than 200 characters"),
    "tool calls that are not objects": ('{"messages": [{"role": "assistant", "tool_calls": ["x"]}]}',
                                        "line 2, field 'messages[0].tool_calls[0]': expected an object, got a string"),
    "messages that are not a list": ('{"messages": {"role": "user"}}',
                                     "line 2, field 'messages': expected a list, got an object"),
}


@pytest.mark.parametrize("case", list(JSONL_CASES))
def test_it_rejects_a_hostile_jsonl_record_naming_its_place(tmp_path, case):
    bad, expected = JSONL_CASES[case]
    path = tmp_path / "runs.jsonl"
    path.write_text(OK_LINE + "\n" + bad + "\n")
    result = do_import_file(path, do_get_or_create_project("p"), fmt="openai-jsonl")
    assert not result.ok
    assert result.batch.error.startswith("runs.jsonl, "), result.batch.error
    assert expected in result.batch.error
    assert Trajectory.objects.count() == Message.objects.count() == Task.objects.count() == 0
    assert ImportBatch.objects.get().status == ImportBatch.FAILED


def test_it_names_the_column_of_a_truncated_last_line_without_a_doubled_at(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(OK_LINE + '\n{"messages": "unfinished')
    result = do_import_file(path, do_get_or_create_project("p"))
    assert result.batch.error == "runs.jsonl, line 2: malformed JSON: Unterminated string starting at line 1 column 14"


OK_RECORD = b'{"task_id": 1, "reward": 1, "info": {}, "traj": [{"role": "user", "content": "hi"}]}'

# A tau-bench file (a JSON array) whose second record is bad in one way: the error names the record and the
# field, or the byte offset when the fault lies between records.
JSON_ARRAY_CASES = {
    "NaN": (b'{"task_id": 2, "reward": NaN, "info": {}, "traj": []}]',
            "record 1, field 'reward': nan is not a number a database can store"),
    "-Infinity": (b'{"task_id": 2, "reward": 0, "info": {"user_cost": -Infinity}, "traj": []}]',
                  "record 1, field 'info.user_cost': -inf is not a number a database can store"),
    "a truncated file": (b'{"task_id": 2, "reward": 0, "info": {"sou',
                         "record 1, field 'info': malformed JSON: the file is cut short (it ends at byte 128)"),
    "non-UTF-8 bytes": (b'{"task_id": 2, "reward": 0, "info": {}, "traj": [{"role": "user", "content": "caf\xe9"}]}]',
                        "record 1, field 'traj[0].content': not UTF-8 text (byte 168)"),
    "a 5,000-digit integer": (b'{"task_id": 2, "reward": ' + b"9" * 5000 + b', "info": {}, "traj": []}]',
                              "record 1, field 'reward': an integer of 5000 digits is out of range"),
    "a missing comma": (b'{"task_id": 2, "reward": 0 "info": {}, "traj": []}]',
                        "record 1, field 'reward': malformed JSON: Expecting ',' delimiter (byte 114)"),
    "two records without a comma": (b'{"task_id": 2, "reward": 0, "info": {}, "traj": []} {"task_id": 3}]',
                                    "byte 139: malformed JSON: expected ',' or ']' after record 1, found '{'"),
    "data after the array": (b'{"task_id": 2, "reward": 0, "info": {}, "traj": []}] x',
                             "byte 140: malformed JSON: 'x' after the end of the top-level value"),
    "nested 100,000 levels deep": (b'{"task_id": 2, "reward": 0, "info": {}, "traj": [' + nested(100_000).encode()
                                   + b"]}]", "record 1, field 'traj[0][0][0]"),
}


@pytest.mark.parametrize("case", list(JSON_ARRAY_CASES))
def test_it_rejects_a_hostile_json_array_record_naming_its_place(tmp_path, case):
    bad, expected = JSON_ARRAY_CASES[case]
    path = tmp_path / "tau.json"
    path.write_bytes(b"[" + OK_RECORD + b",\n" + bad)
    project = do_get_or_create_project("p")
    with at_most_extra(200):  # the deep case once took 23 GB
        result = do_import_file(path, project)
    assert not result.ok
    assert result.batch.error.startswith("tau.json, " + expected), result.batch.error
    assert "b'" not in result.batch.error  # no Python bytes repr
    if "deep" in case:
        assert result.batch.error.endswith("JSON nested too deeply (more than 512 levels)")
    assert Trajectory.objects.count() == Message.objects.count() == Task.objects.count() == 0
    assert ImportBatch.objects.get().status == ImportBatch.FAILED


@pytest.mark.parametrize("name,text", [
    ("tau2.json", '{"info": {}, "tasks": [], "simulations": [{"task_id": "1", "messages": [{"role": "user", '
                  '"content": "CONTENT"}], "agent_cost": NaN}]}'),
    ("log.json", '{"eval": {"run_id": "r", "model": "m"}, "samples": [{"id": 1, "input": "x", "messages": '
                 '[{"role": "user", "content": "CONTENT"}], "metadata": {"x": NaN}}]}'),
], ids=["tau2-bench", "inspect-ai"])
def test_it_names_the_record_and_field_of_bad_numbers_in_tau2_and_inspect_files(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text.replace("CONTENT", "fine"))
    result = do_import_file(path, do_get_or_create_project("p"))
    expected = ("tau2.json, simulation 0, field 'simulations[0].agent_cost': nan is not a number" if name == "tau2.json"
                else "log.json, sample 0, field 'samples[0].metadata.x': nan is not a number")
    assert not result.ok and result.batch.error.startswith(expected), result.batch.error
    assert Trajectory.objects.count() == 0


@pytest.mark.parametrize("name,text", [
    ("tau.json", '[{"task_id": 1, "reward": 1, "info": {}, "traj": [{"role": "user", "content": "CONTENT"}]}]'),
    ("tau2.json", '{"info": {}, "tasks": [], "simulations": [{"task_id": "1", "messages": [{"role": "user", '
                  '"content": "CONTENT"}]}]}'),
    ("log.json", '{"eval": {"run_id": "r", "model": "m"}, "samples": [{"id": 1, "input": "x", "messages": '
                 '[{"role": "user", "content": "CONTENT"}]}]}'),
    ("runs.jsonl", '{"messages": [{"role": "user", "content": "CONTENT"}]}\n'),
    ("run.traj", '{"history": [{"role": "user", "content": "CONTENT"}], "trajectory": [], "info": {}}'),
], ids=["tau-bench", "tau2-bench", "inspect-ai", "openai-jsonl", "swe-agent"])
def test_it_stores_lone_surrogates_as_replacement_characters_in_every_format(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text.replace("CONTENT", "a\\ud800b \\udc00 c \\ud83d\\ude00"))
    result = do_import_file(path, do_get_or_create_project("p"))
    assert result.ok, result.batch.error
    assert Message.objects.get().content == "a\ufffdb \ufffd c \U0001f600"


def test_it_stores_nul_and_lone_surrogates_as_replacement_characters(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "a\u0000b \ud800 c"}]}) + "\n")
    assert do_import_file(path, do_get_or_create_project("p")).ok
    assert Message.objects.get().content == "a\ufffdb \ufffd c"


def test_it_reads_files_that_start_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + OK_LINE.encode() + b"\n")
    assert do_import_file(path, do_get_or_create_project("p")).ok


@needs_shared
@pytest.mark.parametrize("change,expected", [
    (lambda d: d["info"].__setitem__("agent_info", "grok"), "field 'info.agent_info': expected an object"),
    (lambda d: d.__setitem__("simulations", "none"), "field 'simulations': expected a list, got string"),
    (lambda d: d["simulations"][3]["messages"][2].__setitem__("tool_calls", [{"id": "x"}]),
     "simulation 3, field 'simulations[3].messages[2].tool_calls[0].name': missing required field"),
])
def test_it_rejects_a_tau2_file_with_a_wrong_shape(tmp_path, change, expected):
    data = json.loads(TAU2_GROK.read_text())
    change(data)
    path = tmp_path / "tau2.json"
    path.write_text(json.dumps(data))
    result = do_import_file(path, do_get_or_create_project("p"), fmt="tau2-bench")
    assert not result.ok and expected in result.batch.error, result.batch.error
    assert Trajectory.objects.count() == 0


def test_it_rejects_a_tau_bench_file_that_is_not_an_array(tmp_path):
    path = tmp_path / "tau.json"
    path.write_text('{"task_id": 1}')
    result = do_import_file(path, do_get_or_create_project("p"), fmt="tau-bench")
    assert result.batch.error == "tau.json, top level: expected a JSON array of tau-bench EnvRunResult records"


def test_it_rejects_a_swe_agent_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "run.traj"
    path.write_bytes(b'{"history": ["\xff\xfe"]}')
    result = do_import_file(path, do_get_or_create_project("p"))
    assert not result.ok and "not UTF-8 text" in result.batch.error


@needs_shared
def test_it_rejects_an_eval_archive_with_a_corrupt_member(tmp_path):
    path = tmp_path / "broken.eval"
    with zipfile.ZipFile(INSPECT_EVAL) as src, zipfile.ZipFile(path, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(name, b"\xff\xfe not json" if name.startswith("samples/") else data)
    result = do_import_file(path, do_get_or_create_project("p"))
    assert not result.ok and "broken.eval, samples/1_epoch_1.json: not UTF-8 text" in result.batch.error


@needs_shared
def test_it_reimports_a_file_whose_trajectories_were_deleted_or_with_other_options(tmp_path):
    project = do_get_or_create_project("p")
    assert do_import_file(TAU2_GROK, project).batch.n_added == 20
    Trajectory.objects.all().delete()
    again = do_import_file(TAU2_GROK, project)
    assert not again.already_imported and again.batch.n_added == 20
    relabelled = do_import_file(TAU2_GROK, project, source_model="grok-3-relabelled")
    assert relabelled.batch.n_added == 20  # a different source model is a different record
