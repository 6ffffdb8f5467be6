"""SFT records in, a ``datasets.Dataset`` in TRL's conversational prompt/completion shape out.

A record is ``{"prompt": [messages], "completion": [assistant message], "provenance": {...}}``.
Training sees only prompt and completion, and only each message's role and
text: provenance and other keys are dropped here, before Arrow infers a schema
(heterogeneous nested dicts would otherwise be unified into null-padded
structs, or refuse to load). A structured tool call is written in the policy's
action format (``TOOL_CALL: {...}``, see :mod:`nlac_core.actions`), the same
text the policy is prompted to produce.

Every bad record is a DatasetError naming the line (or record number) and field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nlac_core.actions import render_action
from nlac_core.records import ToolCall


class DatasetError(ValueError):
    """A training dataset is missing, empty or malformed; the message names the place."""


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a JSONL file, each checked; blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such dataset file")
    records = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path.name}, line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: not valid JSON ({exc.msg})") from None
            to_example(record, where)
            records.append(record)
    if not records:
        raise DatasetError(f"{path}: the dataset is empty (no records)")
    return records


def to_examples(records: Iterable[dict[str, Any]], source: str | None = None) -> list[dict[str, Any]]:
    """Training examples (prompt/completion of role+content messages) from records, each checked."""
    examples = []
    for number, record in enumerate(records, 1):
        where = f"{source}, record {number}" if source else f"record {number}"
        examples.append(to_example(record, where))
    if not examples:
        raise DatasetError(f"{source or 'records'}: the dataset is empty (no records)")
    return examples


def to_example(record: Any, where: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {_kind(record)}")
    example = {}
    for key in ("prompt", "completion"):
        if key not in record:
            raise DatasetError(f"{where}, field {key!r}: missing (a record needs 'prompt' and 'completion')")
        messages = record[key]
        if not isinstance(messages, list) or not messages:
            raise DatasetError(f"{where}, field {key!r}: expected a non-empty list of chat messages, "
                               f"got {'an empty list' if messages == [] else _kind(messages)}")
        example[key] = [_message(m, f"{key}[{i}]", where) for i, m in enumerate(messages)]
    for i, message in enumerate(example["completion"]):
        if message["role"] != "assistant":
            raise DatasetError(f"{where}, field 'completion[{i}].role': expected 'assistant', "
                               f"got {message['role']!r}")
        if not message["content"].strip():
            raise DatasetError(f"{where}, field 'completion[{i}].content': empty (nothing to learn)")
    return example


def _message(message: Any, field: str, where: str) -> dict[str, str]:
    if not isinstance(message, dict):
        raise DatasetError(f"{where}, field {field!r}: expected a message object, got {_kind(message)}")
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str) or not role:
        raise DatasetError(f"{where}, field '{field}.role': expected a string, got {_kind(role)}")
    if content is not None and not isinstance(content, str):
        raise DatasetError(f"{where}, field '{field}.content': expected a string, got {_kind(content)}")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise DatasetError(f"{where}, field '{field}.tool_calls': expected a list, got {_kind(calls)}")
    parts = [content] if content else []
    for i, call in enumerate(calls):
        parts.append(render_action(None, _tool_call(call, f"{field}.tool_calls[{i}]", where)))
    if content is None and not calls:
        raise DatasetError(f"{where}, field '{field}.content': missing (and no tool_calls)")
    return {"role": role, "content": "\n".join(parts)}


def _tool_call(call: Any, field: str, where: str) -> ToolCall:
    """Ours ({name, arguments}) or OpenAI's ({function: {name, arguments as JSON text}})."""
    body = call.get("function", call) if isinstance(call, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise DatasetError(f"{where}, field {field!r}: expected a tool call with a 'name'")
    arguments = body.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            raise DatasetError(f"{where}, field '{field}.arguments': not valid JSON") from None
    if not isinstance(arguments, dict):
        raise DatasetError(f"{where}, field '{field}.arguments': expected an object, got {_kind(arguments)}")
    return ToolCall(id=str(call.get("id") or ""), name=body["name"], arguments=arguments)


def build_dataset(examples: list[dict[str, Any]]):
    """The in-memory ``datasets.Dataset`` TRL takes (nothing is written to the datasets cache)."""
    from datasets import Dataset  # lazy: datasets only for a training run

    return Dataset.from_list(examples)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
