"""Inspect AI eval logs: ``.json`` (one object with ``eval`` and ``samples``) and the
zipped ``.eval`` container (``header.json`` plus one ``samples/*.json`` per sample).

Each sample (one epoch of one dataset item) becomes a trajectory; the epoch is
its trial. Scores map to a reward: ``C``/``I``/``P`` (correct / incorrect /
partial) or a number; the first scorer wins and all scores are kept.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nlac_core.formats.base import (
    Context,
    FormatError,
    Item,
    Obj,
    content_text,
    first_json_char,
    loads,
    record,
)
from nlac_core.formats.json_stream import member, require_lists, stream_array
from nlac_core.records import ROLES, Message, TaskRecord, ToolCall, TrajectoryRecord

NAME = "inspect-ai"
_LETTER_SCORES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_MSG_KNOWN = {"role", "content", "tool_calls", "tool_call_id", "function"}
MAX_MEMBER_BYTES = 256 * 1024 * 1024  # one sample of an .eval archive, uncompressed


def sniff(head: bytes, path: Path) -> bool:
    if path.suffix == ".eval":
        return True
    return path.suffix == ".json" and first_json_char(head) == "{" and b'"eval"' in head and b'"run_id"' in head


def _score_reward(scores: dict[str, Any] | None) -> float | None:
    for score in (scores or {}).values():
        value = score.get("value") if isinstance(score, dict) else None
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str) and value in _LETTER_SCORES:
            return _LETTER_SCORES[value]
    return None


def parse_message(msg: Obj) -> Message:
    role = msg.choice("role", ROLES)
    calls = tuple(
        ToolCall(id=str(tc.req("id", str)), name=tc.req("function", str),
                 arguments=tc.opt("arguments", dict, default={}))
        for tc in msg.objs("tool_calls", required=False)
    )
    return Message(
        role=role,
        content=content_text(msg.data.get("content"), msg.ctx, f"{msg.path}.content"),
        tool_calls=calls,
        tool_call_id=msg.opt("tool_call_id", str),
        name=msg.opt("function", str),
        requestor="assistant" if role == "tool" else None,
        meta={k: v for k, v in msg.data.items() if k not in _MSG_KNOWN},
    )


def parse_sample(sample: Obj, eval_info: dict[str, Any], source_model: str) -> TrajectoryRecord:
    raw_input = sample.data.get("input")
    instruction = raw_input if isinstance(raw_input, str) else json.dumps(raw_input, ensure_ascii=False)
    target = sample.data.get("target")
    scores = sample.opt("scores", dict)
    return TrajectoryRecord(
        task=TaskRecord(
            external_id=str(sample.req("id", str, int)),
            instruction=instruction,
            gold_answer=target if isinstance(target, str) else json.dumps(target) if target is not None else None,
        ),
        messages=tuple(parse_message(m) for m in sample.objs("messages")),
        trial=max(0, int(sample.opt("epoch", int, default=1)) - 1),
        source_model=source_model or str(eval_info.get("model") or ""),
        reward=_score_reward(scores),
        reward_info=scores,
        termination_reason=str(sample.data.get("limit") or "") if isinstance(sample.data.get("limit"), str) else "",
        error=json.dumps(sample.data["error"]) if sample.has("error") else "",
        usage=sample.opt("model_usage", dict, default={}),
        meta={"task": eval_info.get("task", ""), "run_id": eval_info.get("run_id", "")},
    )


def _read_eval_zip(path: Path, source_model: str) -> Iterator[Item]:
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise FormatError(path, "", f"not a zipped Inspect .eval log: {exc}") from exc
    with archive:
        names = archive.namelist()
        if "header.json" not in names:
            raise FormatError(path, "header.json", "missing from the .eval archive")
        header = _load_member(archive, "header.json", path)
        eval_info = record(header, Context(str(path), "header.json")).obj("eval").data
        samples = sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))
        for index, name in enumerate(samples):
            ctx = Context(str(path), name)
            sample = record(_load_member(archive, name, path), ctx)
            yield Item(name, index, parse_sample(sample, eval_info, source_model))


def _load_member(archive: zipfile.ZipFile, name: str, path: Path) -> Any:
    size = archive.getinfo(name).file_size
    if size > MAX_MEMBER_BYTES:
        raise FormatError(path, name, f"member is {size} bytes uncompressed; the limit is {MAX_MEMBER_BYTES}")
    try:
        data = archive.read(name)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise FormatError(path, name, f"corrupt member of the .eval archive: {exc}") from exc
    return loads(data, path, name)


def read(path: str | Path, source_model: str = "") -> Iterator[Item]:
    path = Path(path)
    if path.suffix == ".eval":
        yield from _read_eval_zip(path, source_model)
        return
    require_lists(path, optional=("samples",))
    eval_raw = member(path, "eval")
    eval_info = record(eval_raw, Context(str(path), "eval"), "eval").data
    for index, raw, clean in stream_array(path, "samples"):
        ctx = Context(str(path), f"sample {index}")
        yield Item(ctx.where, index, parse_sample(record(raw, ctx, f"samples[{index}]", clean_already=clean), eval_info,
                                                 source_model))
