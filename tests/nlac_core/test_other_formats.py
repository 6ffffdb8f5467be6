"""OpenAI chat JSONL, Inspect AI logs (.json and .eval), SWE-agent .traj."""

import json

import pytest

from nlac_core.formats import FormatError, detect, read
from tests.conftest import INSPECT_EVAL, INSPECT_JSON, SWE_TRAJ, TAU2_EMPTY, TAU2_GROK, TAU_GPT4O, needs_shared


def records(path, **kw):
    return [i.record for i in read(path, **kw) if hasattr(i.record, "messages")]


def test_it_reads_openai_chat_jsonl_with_tools_reward_and_metadata(tmp_path):
    path = tmp_path / "chats.jsonl"
    lines = [
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "c1", "type": "function",
                           "function": {"name": "calc", "arguments": "{\"x\": \"2+2\"}"}}]},
                      {"role": "tool", "tool_call_id": "c1", "content": "4"},
                      {"role": "assistant", "content": [{"type": "text", "text": "4"}]}],
         "tools": [{"type": "function", "function": {"name": "calc"}}], "reward": 1,
         "metadata": {"task_id": "sum", "trial": 2, "model": "m1", "split": "dev"}},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert detect(path) == "openai-jsonl"
    first, second = records(path)
    assert first.task.external_id == "sum" and first.trial == 2 and first.source_model == "m1"
    assert first.reward == 1.0 and first.success
    assert first.messages[2].tool_calls[0].arguments == {"x": "2+2"}
    assert first.messages[4].content == "4"
    assert first.meta == {"split": "dev", "tools": [{"type": "function", "function": {"name": "calc"}}]}
    assert second.task.external_id == "2" and second.reward is None


def test_it_names_the_line_of_a_malformed_jsonl_record(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"messages": []}\n{"messages": [{"role": "user", "content": "x"}]\n')
    with pytest.raises(FormatError, match=r"bad.jsonl, line 2: malformed JSON"):
        records(path, fmt="openai-jsonl")


def test_it_rejects_unknown_roles_and_bad_arguments(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "wizard", "content": "x"}]}) + "\n")
    with pytest.raises(FormatError, match=r"line 1, field 'messages\[0\].role': unknown role 'wizard'"):
        records(path, fmt="openai-jsonl")
    path.write_text(json.dumps({"messages": [{"role": "assistant", "tool_calls": [
        {"id": "a", "function": {"name": "f", "arguments": "{not json"}}]}]}) + "\n")
    with pytest.raises(FormatError, match=r"field 'messages\[0\].tool_calls\[0\].function.arguments'"):
        records(path, fmt="openai-jsonl")


@needs_shared
def test_it_reads_the_same_inspect_log_from_json_and_eval():
    [from_json] = records(INSPECT_JSON)
    [from_eval] = records(INSPECT_EVAL)
    assert from_json == from_eval
    assert from_json.source_model == "ollama/llama3.1"
    assert [m.role for m in from_json.messages] == ["system", "user", "assistant"]
    assert from_json.task.gold_answer == " Yes"  # as the log has it
    assert from_json.reward == 0.0  # score "I": incorrect
    assert from_json.trial == 0  # epoch 1


@needs_shared
def test_it_reads_a_swe_agent_trajectory_with_structured_tool_calls():
    [record] = records(SWE_TRAJ)
    assert [m.role for m in record.messages].count("assistant") == 5
    call = record.messages[2].tool_calls[0]
    assert call.name == "find_file" and call.arguments == {"file_name": "missing_colon.py"}
    assert record.messages[3].tool_call_id == call.id
    assert record.messages[2].meta["action"] == "find_file missing_colon.py"


@needs_shared
@pytest.mark.parametrize("path,expected", [
    (TAU_GPT4O, "tau-bench"), (TAU2_GROK, "tau2-bench"), (TAU2_EMPTY, "tau2-bench"),
    (INSPECT_JSON, "inspect-ai"), (INSPECT_EVAL, "inspect-ai"), (SWE_TRAJ, "swe-agent"),
])
def test_it_detects_the_format_of_real_files(path, expected):
    assert detect(path) == expected


def test_it_refuses_files_it_cannot_place(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    with pytest.raises(FormatError, match="empty.json: the file is empty"):
        detect(empty)
    prose = tmp_path / "notes.txt"
    prose.write_text("hello")
    with pytest.raises(FormatError, match="could not detect the format"):
        detect(prose)
    zipped = tmp_path / "bad.eval"
    zipped.write_bytes(b"PK not really a zip")
    with pytest.raises(FormatError, match="not a zipped Inspect .eval log"):
        records(zipped)
