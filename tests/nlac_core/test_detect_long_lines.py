"""Our JSONL is detected as ours whatever the length of its first line (keys are sorted: ``schema`` comes after
the messages, past the 64 KiB head the sniffers see), in flat memory."""

from __future__ import annotations

import json

from nlac_core.formats import detect, nlac_jsonl, read
from nlac_core.records import Message, TaskRecord, TrajectoryRecord
from tests.memory_cap import at_most_extra, nested


def long_record() -> TrajectoryRecord:
    return TrajectoryRecord(task=TaskRecord(external_id="t1"), source_model="m", termination_reason="max_steps",
                            cost=0.5, usage={"tokens": 7}, meta={"k": "v"},
                            messages=(Message(role="user", content="x" * 200_000),))


def test_it_detects_our_jsonl_when_the_first_line_is_longer_than_the_head(tmp_path):
    path = tmp_path / "export.jsonl"
    path.write_text(nlac_jsonl.dumps(long_record()) + "\n")
    assert path.read_text().index('"schema"') > 65536
    assert detect(path) == "nlac-jsonl"
    assert [i.record for i in read(path)] == [long_record()]


def test_it_still_detects_a_long_openai_chat_line_as_openai(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "x" * 200_000}], "schema": "theirs"}) + "\n")
    assert detect(path) == "openai-jsonl"


def test_it_reads_no_further_than_the_nesting_limit_to_decide(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"messages": ' + nested(100_000) + ', "schema": "' + nlac_jsonl.SCHEMA + '"}\n')
    with at_most_extra(150):
        assert detect(path) == "openai-jsonl"  # the first line is not ours; reading it will say what is wrong


def test_it_detects_our_jsonl_with_a_long_first_line_under_another_name(tmp_path):
    path = tmp_path / "export.json"
    path.write_text(nlac_jsonl.dumps(long_record()) + "\n")
    assert detect(path) == "nlac-jsonl"
