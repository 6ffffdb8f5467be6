"""openai_chat.parse_message reads a well-formed message without the field-by-field checks (``_well_formed``): for
every shape a message comes in, what it makes, or the error it names, is what the checked way makes or names."""

from __future__ import annotations

import pytest

from nlac_core.formats import openai_chat
from nlac_core.formats.base import Context, FormatError, Obj

SHAPES = {
    "user text": {"role": "user", "content": "hello"},
    "null content": {"role": "assistant", "content": None},
    "no content": {"role": "assistant"},
    "tool calls": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "find", "arguments": "{\"a\": 1}"}},
        {"id": 7, "function": {"name": "book", "arguments": {"b": [1, 2]}}},
        {"function": {"name": "nothing", "arguments": ""}}]},
    "tool calls null": {"role": "assistant", "content": "x", "tool_calls": None},
    "tool calls on a user": {"role": "user", "content": "x", "tool_calls": "ignored"},
    "tool result": {"role": "tool", "content": "{}", "tool_call_id": "call_1", "name": "find"},
    "legacy function role": {"role": "function", "content": "r", "name": "find"},
    "swe-agent id list": {"role": "tool", "content": "r", "tool_call_ids": ["c9", "c10"]},
    "content parts": {"role": "user", "content": [{"type": "text", "text": "a"}, "b"]},
    "unknown keys kept": {"role": "system", "content": "p", "refusal": None, "audio": {"x": 1}},
    "extra known": {"role": "user", "content": "p", "turn": 3},
    # faults: the error must be the checked way's
    "unknown role": {"role": "wizard", "content": "x"},
    "role not text": {"role": 3},
    "no role": {"content": "x"},
    "bad content": {"role": "user", "content": 5},
    "bad tool call id": {"role": "tool", "content": "x", "tool_call_id": 4},
    "tool calls not a list": {"role": "assistant", "tool_calls": {"a": 1}},
    "tool call not an object": {"role": "assistant", "tool_calls": ["x"]},
    "no function name": {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
    "boolean call id": {"role": "assistant", "tool_calls": [{"id": True, "function": {"name": "f"}}]},
    "bad arguments": {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}]},
    "arguments not an object": {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]},
    "bad name after bad arguments": {"role": "assistant", "name": 5,
                                     "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]},
}


def parsed(data, extra=frozenset()):
    try:
        return openai_chat.parse_message(Obj(data, Context("f.json", "record 0"), "traj[2]"), extra)
    except FormatError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_it_reads_every_shape_as_the_checked_way_does(shape, monkeypatch):
    extra = frozenset({"turn"})
    fast = parsed(SHAPES[shape], extra)
    monkeypatch.setattr(openai_chat, "_well_formed", lambda msg, extra_known: None)
    assert fast == parsed(SHAPES[shape], extra)


def test_it_takes_the_fast_way_for_the_usual_shapes():
    for shape in ("user text", "null content", "tool calls", "tool result", "unknown keys kept"):
        assert openai_chat._well_formed(Obj(SHAPES[shape], Context("f.json", "record 0"), "traj[0]"),
                                        frozenset()) is not None, shape
