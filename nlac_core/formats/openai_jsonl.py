"""OpenAI chat JSONL: one conversation per line, ``{messages, tools?, reward?, metadata?}``.

The shape fine-tuning and many agent frameworks write. ``metadata`` may carry
``task_id``, ``trial``, ``model``, ``instruction``; anything else is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from nlac_core.formats.base import Context, Item, Obj, Shard, record, stream_lines
from nlac_core.formats.openai_chat import parse_message
from nlac_core.records import TaskRecord, TrajectoryRecord

NAME = "openai-jsonl"


def sniff(head: bytes, path: Path) -> bool:
    first = head.split(b"\n", 1)[0]
    return path.suffix in (".jsonl", ".ndjson") and b'"messages"' in first and b'"schema"' not in first


def parse_line(rec: Obj, lineno: int, source_model: str) -> TrajectoryRecord:
    messages = tuple(parse_message(m) for m in rec.objs("messages"))
    meta = rec.obj("metadata", required=False)
    md = meta.data if meta is not None else {}
    instruction = md.get("instruction")
    if not isinstance(instruction, str):
        instruction = next((m.content or "" for m in messages if m.role == "user"), "")
    reward = rec.opt("reward", float)
    tools = rec.opt("tools", list)
    extra = {k: v for k, v in md.items() if k not in ("task_id", "trial", "model", "instruction")}
    if tools is not None:
        extra["tools"] = tools
    return TrajectoryRecord(
        task=TaskRecord(external_id=str(md.get("task_id", lineno)), instruction=instruction),
        messages=messages,
        trial=meta.opt("trial", int, default=0) if meta is not None else 0,
        source_model=source_model or str(md.get("model") or ""),
        reward=float(reward) if reward is not None else None,
        meta=extra,
    )


SHARDED = True


def read(path: str | Path, source_model: str = "", shard: Shard | None = None) -> Iterator[Item]:
    path = Path(path)
    for index, lineno, raw, clean in stream_lines(path, shard):
        ctx = Context(str(path), f"line {lineno}")
        yield Item(ctx.where, index, parse_line(record(raw, ctx, clean_already=clean), lineno, source_model))
