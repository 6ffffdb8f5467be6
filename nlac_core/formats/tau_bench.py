"""tau-bench results: a JSON array of ``EnvRunResult`` records
``{task_id, reward, trial, info, traj}`` (sierra-research/tau-bench).

``info`` is ``{task, source, user_cost, reward_info}`` for a finished run,
``{error, traceback}`` for a harness error (kept as a failed trajectory), and
``reward_info`` is null when the agent hit its step cap.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from nlac_core.formats.base import (
    Context,
    FormatError,
    Item,
    Obj,
    Shard,
    first_json_char,
    head_bytes,
    record,
)
from nlac_core.formats.json_stream import stream_array
from nlac_core.formats.openai_chat import parse_message
from nlac_core.records import TaskRecord, TrajectoryRecord

NAME = "tau-bench"


def sniff(head: bytes, path: Path) -> bool:
    """The only array-of-records format we read."""
    return path.suffix == ".json" and first_json_char(head) == "["


def termination_reason(info: Obj) -> str:
    if info.has("error"):
        return "error"
    if info.data.get("reward_info") is None:
        return "max_steps"
    source = info.opt("source", str, default="")
    if source == "user":
        return "user_stop"
    if source == "transfer_to_human_agents":
        return "transfer"
    return f"agent:{source}" if source else "unknown"


def parse_record(rec: Obj, source_model: str, from_file_name: bool = False) -> TrajectoryRecord:
    info = rec.obj("info")
    task_id = rec.req("task_id", int, str)
    task = info.obj("task", required=False)
    task_record = TaskRecord(external_id=str(task_id))
    if task is not None:
        task_record = TaskRecord(
            external_id=str(task_id),
            instruction=task.opt("instruction", str, default=""),
            gold_actions=tuple(a.data for a in task.objs("actions", required=False)),
            gold_outputs=tuple(str(o) for o in task.opt("outputs", list, default=[])),
            meta={k: v for k, v in task.data.items() if k not in ("instruction", "actions", "outputs")},
        )
    messages = tuple(parse_message(m) for m in rec.objs("traj"))
    error = ""
    if info.has("error"):
        error = str(info.data["error"])
        if info.has("traceback"):
            error += "\n\n" + str(info.data["traceback"])
    reward_info = info.opt("reward_info", dict)
    user_cost = info.opt("user_cost", float)
    policy = ""
    if messages and messages[0].role == "system":
        policy = messages[0].content or ""
    return TrajectoryRecord(
        task=task_record,
        messages=messages,
        trial=rec.opt("trial", int, default=0),
        source_model=source_model,
        reward=float(rec.req("reward", float)),
        reward_info=reward_info,
        termination_reason=termination_reason(info),
        error=error,
        usage={"user_cost": user_cost} if user_cost is not None else {},
        policy=policy,
        meta={"source": info.data["source"]} if info.has("source") else {},
        source_model_from_file_name=from_file_name,
    )


SHARDED = True


def read(path: str | Path, source_model: str = "", shard: Shard | None = None) -> Iterator[Item]:
    path = Path(path)
    if first_json_char(head_bytes(path)) != "[":
        raise FormatError(path, "top level", "expected a JSON array of tau-bench EnvRunResult records")
    # tau-bench names its files after the model: the name is a label, not part of the episode (not hashed).
    from_file_name = not source_model
    source_model = source_model or path.stem[:200]
    for index, raw, clean in stream_array(path, shard=shard):
        ctx = Context(str(path), f"record {index}")
        yield Item(ctx.where, index, parse_record(record(raw, ctx, clean_already=clean), source_model, from_file_name))
