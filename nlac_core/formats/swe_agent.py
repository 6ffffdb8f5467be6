"""SWE-agent ``.traj`` files: ``{environment, trajectory[], history[], info}``.

``history`` is the conversation the model saw (OpenAI chat messages with
``thought``/``action`` beside them); ``info`` carries the exit status, the
submission and model stats. One file is one trajectory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from nlac_core.formats.base import Context, FormatError, Item, loads, record
from nlac_core.formats.openai_chat import parse_message
from nlac_core.records import TaskRecord, TrajectoryRecord

NAME = "swe-agent"
MAX_BYTES = 256 * 1024 * 1024  # one trajectory per file: read whole, but never unbounded


def sniff(head: bytes, path: Path) -> bool:
    return path.suffix == ".traj" or (path.suffix == ".json" and b'"history"' in head and b'"trajectory"' in head)


def read(path: str | Path, source_model: str = "") -> Iterator[Item]:
    path = Path(path)
    if path.stat().st_size > MAX_BYTES:
        raise FormatError(path, "", f"file larger than {MAX_BYTES} bytes")
    data = loads(path.read_bytes(), path, "trajectory")
    ctx = Context(str(path), "trajectory")
    rec = record(data, ctx)
    history = rec.objs("history")
    messages = tuple(parse_message(m) for m in history)
    info = rec.obj("info", required=False)
    info_data = info.data if info is not None else {}
    stats = info_data.get("model_stats") if isinstance(info_data.get("model_stats"), dict) else {}
    instruction = next((m.content or "" for m in messages if m.role == "user"), "")
    task_id = info_data.get("instance_id") or rec.opt("environment", str) or path.stem
    yield Item("trajectory", 0, TrajectoryRecord(
        task=TaskRecord(external_id=str(task_id), instruction=instruction),
        messages=messages,
        source_model=source_model or str(info_data.get("model_name") or ""),
        termination_reason=str(info_data.get("exit_status") or ""),
        cost=stats.get("instance_cost") if isinstance(stats.get("instance_cost"), (int, float)) else None,
        usage={k: v for k, v in stats.items() if isinstance(v, (int, float))},
        meta={"info": info_data, "environment": data.get("environment")},
    ))
