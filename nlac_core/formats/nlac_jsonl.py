"""Our own lossless JSONL: one trajectory record per line, ``{"schema": SCHEMA, ...}``.

Export -> import round-trips exactly: every field of :class:`TrajectoryRecord`
is written, and the reader validates every field so a hand-edited file fails
with the line and field that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from nlac_core.formats.base import Context, Item, Obj, Shard, first_json_char, record, stream_lines
from nlac_core.formats.json_stream import first_member
from nlac_core.records import (
    REQUESTORS,
    ROLES,
    Message,
    TaskRecord,
    ToolCall,
    TrajectoryRecord,
    canonical_trajectory_json,
    to_dict,
)

NAME = "nlac-jsonl"
SCHEMA = "nlac.trajectory.v1"


def sniff(head: bytes, path: Path) -> bool:
    """Certain whatever the length of the first line: keys are sorted, so ``schema`` comes after the messages,
    and a line longer than the head is read on (in flat memory) for it; in a file not named as JSONL, only as
    far as the keys we write before it (a one-line tau2 or Inspect file is not read through)."""
    first, newline, _ = head.partition(b"\n")
    if not newline:
        jsonl = path.suffix in (".jsonl", ".ndjson")
        return first_json_char(head) == "{" and first_member(path, "schema", sorted_keys=not jsonl) == SCHEMA
    return b'"schema"' in first and SCHEMA.encode() in first


def dumps(trajectory: TrajectoryRecord) -> str:
    return dumps_plain(to_dict(trajectory))


def dumps_plain(data: dict) -> str:
    """The line of a trajectory given in its ``to_dict`` form (what a snapshot stores, what exports read)."""
    return canonical_trajectory_json({"schema": SCHEMA, **data})


def write(records: Iterable[TrajectoryRecord], out: IO[str]) -> int:
    n = 0
    for trajectory in records:
        out.write(dumps(trajectory) + "\n")
        n += 1
    return n


def _task(t: Obj) -> TaskRecord:
    return TaskRecord(
        external_id=t.req("external_id", str),
        instruction=t.req("instruction", str),
        gold_actions=tuple(a.data for a in t.objs("gold_actions")),
        gold_outputs=tuple(t.req("gold_outputs", list)),
        gold_answer=t.opt("gold_answer", str),
        split=t.req("split", str),
        meta=t.req("meta", dict),
    )


def _message(m: Obj) -> Message:
    role = m.choice("role", ROLES)
    requestor = m.choice("requestor", REQUESTORS, required=False)
    return Message(
        role=role,
        content=m.opt("content", str),
        tool_calls=tuple(ToolCall(id=tc.req("id", str), name=tc.req("name", str),
                                  arguments=tc.req("arguments", dict), requestor=tc.choice("requestor", REQUESTORS))
                         for tc in m.objs("tool_calls")),
        tool_call_id=m.opt("tool_call_id", str),
        name=m.opt("name", str),
        requestor=requestor,
        turn_idx=m.opt("turn_idx", int),
        meta=m.req("meta", dict),
    )


def parse(rec: Obj) -> TrajectoryRecord:
    schema = rec.req("schema", str)
    if schema != SCHEMA:
        rec.ctx.fail(f"unsupported schema {schema!r} (this version reads {SCHEMA!r})", "schema")
    reward = rec.opt("reward", float)
    return TrajectoryRecord(
        task=_task(rec.obj("task")),
        messages=tuple(_message(m) for m in rec.objs("messages")),
        trial=rec.req("trial", int),
        source_model=rec.req("source_model", str),
        source_checkpoint=rec.req("source_checkpoint", str),
        user_model=rec.req("user_model", str),
        reward=float(reward) if reward is not None else None,
        reward_info=rec.opt("reward_info", dict),
        termination_reason=rec.req("termination_reason", str),
        error=rec.req("error", str),
        cost=rec.opt("cost", float),
        usage=rec.req("usage", dict),
        external_id=rec.req("external_id", str),
        policy=rec.req("policy", str),
        meta=rec.req("meta", dict),
        source_model_from_file_name=rec.opt("source_model_from_file_name", bool, default=False),
    )


SHARDED = True


def read(path: str | Path, source_model: str = "", shard: Shard | None = None) -> Iterator[Item]:
    for index, lineno, raw, clean in stream_lines(path, shard):
        ctx = Context(str(path), f"line {lineno}")
        yield Item(ctx.where, index, parse(record(raw, ctx, clean_already=clean)))


def loads_all(text: str) -> list[TrajectoryRecord]:
    """Parse JSONL text already in memory (tests, small API payloads)."""
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            out.append(parse(Obj(json.loads(line), Context("<text>", f"line {lineno}"))))
    return out
