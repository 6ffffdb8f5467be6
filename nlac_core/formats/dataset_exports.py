"""Writing dataset snapshots in the formats training libraries read. Every writer streams: it takes an
iterable of records and holds at most one batch of them, whatever the size of the snapshot.

SFT kinds (records shaped like ``nlac_core.datasets``: prompt, completion, split, source, provenance):
- ``jsonl`` — chat format, one ``{"messages": [...]}`` per line (TRL ``SFTTrainer`` takes it unchanged);
- ``jsonl-prompt-completion`` — ``{"prompt": [...], "completion": [...]}`` per line (TRL's other shape);
- ``parquet`` — one file, columns messages / prompt / completion / split / source / provenance (JSON text);
- ``hf`` — a Hugging Face ``datasets`` directory (``DatasetDict.save_to_disk``), one split per snapshot split.

The trajectories kind (records are lossless trajectory dicts, ``records.to_dict``):
- ``nlac-jsonl`` — our lossless JSONL (re-importable); ``tau-bench`` — a tau-bench results JSON array;
- ``jsonl`` — chat format with ``tools`` (OpenAI function schemas) where the episode called tools.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from nlac_core.datasets import SPLITS, as_messages, as_prompt_completion
from nlac_core.formats import nlac_jsonl
from nlac_core.records import LONG, MARK, encode_sparing

SFT_FORMATS = ("jsonl", "jsonl-prompt-completion", "parquet", "hf")
TRAJECTORY_FORMATS = ("nlac-jsonl", "tau-bench", "jsonl")
EXTENSIONS = {"jsonl": ".jsonl", "jsonl-prompt-completion": ".jsonl", "parquet": ".parquet", "hf": "",
              "nlac-jsonl": ".jsonl", "tau-bench": ".json"}
BATCH = 5000

Progress = Callable[[int], None]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _count(records: Iterable[Mapping[str, Any]], progress: Progress | None) -> Iterator[Mapping[str, Any]]:
    for n, record in enumerate(records, 1):
        yield record
        if progress is not None and n % BATCH == 0:
            progress(n)


# -- SFT kinds ------------------------------------------------------------------------------------------------

def write_jsonl(records: Iterable[Mapping[str, Any]], out: IO[str], variant: str = "messages",
                progress: Progress | None = None) -> int:
    shape = as_messages if variant == "messages" else as_prompt_completion
    n = 0
    for record in _count(records, progress):
        out.write(_dumps(shape(record)) + "\n")
        n += 1
    return n


def _arrow_schema():
    import pyarrow as pa  # lazy (here and below): pyarrow and datasets load only for the Parquet/HF exports

    message = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    return pa.schema([("messages", message), ("prompt", message), ("completion", message), ("split", pa.string()),
                      ("source", pa.string()), ("provenance", pa.string())])


def _plain_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    return [{"role": str(m["role"]), "content": "" if m.get("content") is None else str(m["content"])}
            for m in messages]


def _columns(batch: list[Mapping[str, Any]]) -> dict[str, list[Any]]:
    prompts = [_plain_messages(r["prompt"]) for r in batch]
    completions = [_plain_messages(r["completion"]) for r in batch]
    return {"messages": [p + c for p, c in zip(prompts, completions, strict=True)], "prompt": prompts,
            "completion": completions, "split": [r.get("split", "") for r in batch],
            "source": [r.get("source", "") for r in batch],
            "provenance": [_dumps(r.get("provenance") or {}) for r in batch]}


def write_parquet(records: Iterable[Mapping[str, Any]], path: str | Path, progress: Progress | None = None) -> int:
    """One row group per BATCH records: memory stays at one batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    n = 0
    with pq.ParquetWriter(str(path), schema, compression="zstd") as writer:
        batch: list[Mapping[str, Any]] = []
        for record in records:
            batch.append(record)
            if len(batch) == BATCH:
                writer.write_table(pa.Table.from_pydict(_columns(batch), schema=schema))
                n += len(batch)
                batch.clear()
                if progress is not None:
                    progress(n)
        if batch or n == 0:
            writer.write_table(pa.Table.from_pydict(_columns(batch), schema=schema))
            n += len(batch)
    return n


def write_hf_dataset(records_of_split: Callable[[str], Iterable[Mapping[str, Any]]], directory: str | Path,
                     progress: Progress | None = None) -> dict[str, int]:
    """A ``datasets`` DatasetDict directory with a split per non-empty snapshot split. Each split is streamed
    to a Parquet file first, which ``datasets`` turns into its memory-mapped Arrow files."""
    import datasets

    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ValueError(f"{directory} exists and is not an empty directory: choose a new place for the dataset")
    counts: dict[str, int] = {}
    done = 0
    with tempfile.TemporaryDirectory(prefix="nlac-hf-", dir=directory.parent if directory.parent.is_dir()
                                     else None) as tmp:
        parts = {}
        for split in SPLITS:
            part = Path(tmp) / f"{split}.parquet"
            n = write_parquet(records_of_split(split), part,
                              None if progress is None else (lambda k, base=done: progress(base + k)))
            done += n
            if n:
                parts[split], counts[split] = part, n
        if not parts:
            raise ValueError("the snapshot has no records to export")
        cache = Path(tmp) / "cache"
        datasets.disable_progress_bars()
        loaded = datasets.DatasetDict({split: datasets.Dataset.from_parquet(str(part), cache_dir=str(cache),
                                                                            keep_in_memory=False)
                                       for split, part in parts.items()})
        staged = Path(tmp) / "dataset"
        loaded.save_to_disk(str(staged))
        if directory.exists():
            directory.rmdir()  # empty, checked above
        shutil.move(str(staged), str(directory))  # whole, or not at all
    return counts


# -- trajectories ---------------------------------------------------------------------------------------------

def write_trajectories_jsonl(records: Iterable[Mapping[str, Any]], out: IO[str],
                             progress: Progress | None = None) -> int:
    n = 0
    for record in _count(records, progress):
        out.write(nlac_jsonl.dumps_plain(record) + "\n")
        n += 1
    return n


def openai_message(m: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
    if m.get("tool_calls"):
        out["tool_calls"] = [{"id": tc["id"], "type": "function",
                              "function": {"name": tc["name"], "arguments": _dumps(tc["arguments"])}}
                             for tc in m["tool_calls"]]
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    if m.get("name") and m["role"] == "tool":
        out["name"] = m["name"]
    return out


def tool_schemas(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The episode's tools as OpenAI function schemas: those the source file declared (``meta.tools``), else
    one per tool the agent called, with the argument names it used (types as JSON Schema saw them)."""
    declared = (record.get("meta") or {}).get("tools")
    if isinstance(declared, list) and declared:
        return declared
    seen: dict[str, dict[str, Any]] = {}
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    for m in record["messages"]:
        if m["role"] != "assistant":
            continue
        for tc in m.get("tool_calls") or ():
            props = seen.setdefault(tc["name"], {})
            for name, value in (tc.get("arguments") or {}).items():
                props.setdefault(name, {"type": kinds.get(type(value), "string")})
    return [{"type": "function", "function": {"name": name, "description": "",
                                              "parameters": {"type": "object", "properties": props}}}
            for name, props in seen.items()]


def write_trajectories_chat(records: Iterable[Mapping[str, Any]], out: IO[str],
                            progress: Progress | None = None) -> int:
    n = 0
    for record in _count(records, progress):
        line: dict[str, Any] = {"messages": [openai_message(m) for m in record["messages"]]}
        tools = tool_schemas(record)
        if tools:
            line["tools"] = tools
        out.write(_dumps(line) + "\n")
        n += 1
    return n


def tau_bench_result(record: Mapping[str, Any]) -> dict[str, Any]:
    """One tau-bench ``EnvRunResult``: what ``formats.tau_bench`` reads back to the same episode."""
    task = record["task"]
    info: dict[str, Any] = {"task": {**(task.get("meta") or {}), "instruction": task.get("instruction", ""),
                                     "actions": list(task.get("gold_actions") or []),
                                     "outputs": list(task.get("gold_outputs") or [])},
                            "reward_info": record.get("reward_info")}
    source = (record.get("meta") or {}).get("source")
    if source is not None:
        info["source"] = source
    if (record.get("usage") or {}).get("user_cost") is not None:
        info["user_cost"] = record["usage"]["user_cost"]
    if record.get("error"):
        info["error"] = record["error"]
    task_id: Any = task.get("external_id", "")
    if isinstance(task_id, str) and task_id.isdigit():
        task_id = int(task_id)
    return {"task_id": task_id, "reward": record.get("reward") or 0.0, "trial": record.get("trial", 0),
            "info": info, "traj": [openai_message(m) for m in record["messages"]]}


def write_tau_bench(records: Iterable[Mapping[str, Any]], out: IO[str], progress: Progress | None = None) -> int:
    """A JSON array written element by element (never the whole array in memory)."""
    n = 0
    out.write(TAU_BENCH_OPEN)
    for record in _count(records, progress):
        out.write(("," if n else "") + tau_bench_element(record))
        n += 1
    out.write(TAU_BENCH_CLOSE)
    return n


# A tau-bench file is TAU_BENCH_OPEN, its elements joined by ",", then TAU_BENCH_CLOSE: runs of elements made apart
# (by several processes) join the same way.
TAU_BENCH_OPEN, TAU_BENCH_CLOSE = "[", "\n]\n"


def tau_bench_element(record: Mapping[str, Any]) -> str:
    result = tau_bench_result(record)
    traj = result["traj"]
    policy = traj[0].get("content") if traj and traj[0].get("role") == "system" else None
    if not isinstance(policy, str) or len(policy) < LONG:
        return "\n" + _dumps(result)
    marked = {**result, "traj": [{**traj[0], "content": MARK}, *traj[1:]]}
    return "\n" + encode_sparing(_dumps, result, marked, policy, 1)
