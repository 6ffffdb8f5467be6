import json

import pytest

from nlac_core.checkpoints import dataset_hash
from nlac_core.training import DatasetError, read_records, to_examples
from tests.nlac_core.sft_helpers import records


def write(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_it_keeps_only_role_and_text_of_prompt_and_completion():
    examples = to_examples(records())
    assert set(examples[0]) == {"prompt", "completion"}
    assert all(set(m) == {"role", "content"} for e in examples for m in e["prompt"] + e["completion"])
    assert examples[1]["completion"][0]["content"].endswith("OUTCOME: reward 1.0")


def test_it_writes_structured_tool_calls_in_the_policy_action_format():
    record = {"prompt": [{"role": "user", "content": "cancel NO6JO3"}],
              "completion": [{"role": "assistant", "content": None, "tool_calls": [
                  {"type": "function", "function": {"name": "cancel_reservation",
                                                    "arguments": '{"reservation_id": "NO6JO3"}'}}]}]}
    (example,) = to_examples([record])
    assert example["completion"][0]["content"] == (
        'TOOL_CALL: {"name": "cancel_reservation", "arguments": {"reservation_id": "NO6JO3"}}')


@pytest.mark.parametrize("line, message", [
    ("{not json", "data.jsonl, line 2: not valid JSON"),
    ("[1, 2]", "data.jsonl, line 2: expected a JSON object, got a list"),
    ({"prompt": [{"role": "user", "content": "hi"}]}, "data.jsonl, line 2, field 'completion': missing"),
    ({"completion": [{"role": "assistant", "content": "hi"}]}, "data.jsonl, line 2, field 'prompt': missing"),
    ({"prompt": [], "completion": [{"role": "assistant", "content": "x"}]},
     "data.jsonl, line 2, field 'prompt': expected a non-empty list of chat messages, got an empty list"),
    ({"prompt": [{"role": "user", "content": 3}], "completion": [{"role": "assistant", "content": "x"}]},
     "data.jsonl, line 2, field 'prompt[0].content': expected a string, got an integer"),
    ({"prompt": [{"content": "hi"}], "completion": [{"role": "assistant", "content": "x"}]},
     "data.jsonl, line 2, field 'prompt[0].role': expected a string, got null"),
    ({"prompt": [{"role": "user", "content": "hi"}], "completion": [{"role": "user", "content": "x"}]},
     "data.jsonl, line 2, field 'completion[0].role': expected 'assistant', got 'user'"),
    ({"prompt": [{"role": "user", "content": "hi"}], "completion": [{"role": "assistant", "content": "  "}]},
     "data.jsonl, line 2, field 'completion[0].content': empty"),
])
def test_it_names_the_line_and_field_of_a_bad_record(tmp_path, line, message):
    path = write(tmp_path / "data.jsonl", [records()[0], line])
    with pytest.raises(DatasetError) as info:
        read_records(path)
    assert str(info.value).startswith(message)


def test_it_refuses_a_missing_or_empty_dataset(tmp_path):
    with pytest.raises(DatasetError, match="nope.jsonl: no such dataset file"):
        read_records(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="empty.jsonl: the dataset is empty"):
        read_records(write(tmp_path / "empty.jsonl", ["", "  "]))
    with pytest.raises(DatasetError, match="the dataset is empty"):
        to_examples([])


def test_it_hashes_records_in_order_and_ignores_spacing(tmp_path):
    rows = records()
    path = tmp_path / "data.jsonl"
    path.write_text("\n\n".join(json.dumps(r, indent=None, separators=(", ", " : ")) for r in rows) + "\n")
    assert dataset_hash(read_records(path)) == dataset_hash(rows)
    assert dataset_hash(rows[::-1]) != dataset_hash(rows)
    assert len(dataset_hash(rows)) == 64
