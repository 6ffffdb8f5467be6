"""Formats by name, and auto-detection from a file's name and first bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from nlac_core.formats import inspect_ai, nlac_jsonl, openai_jsonl, swe_agent, tau2_bench, tau_bench
from nlac_core.formats.base import FormatError, Item, Shard, head_bytes

HEAD_BYTES = 65536  # what the sniffers see of a file

# Order matters for detection: the most specific sniffers first.
FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (
    nlac_jsonl, inspect_ai, swe_agent, tau2_bench, tau_bench, openai_jsonl,
)}


def detect(path: str | Path) -> str:
    path = Path(path)
    head = head_bytes(path, HEAD_BYTES)
    if not head.strip():
        if path.suffix in (".jsonl", ".ndjson") and len(head) < HEAD_BYTES:
            return nlac_jsonl.NAME  # JSONL of no records, as the export of an empty project is: imports nothing
        raise FormatError(path, "", "the file is empty")
    for name, module in FORMATS.items():
        if module.sniff(head, path):
            return name
    raise FormatError(path, "", f"could not detect the format; pass one of: {', '.join(FORMATS)}")


def read(path: str | Path, fmt: str | None = None, source_model: str = "",
         shard: Shard | None = None) -> Iterator[Item]:
    """Items (tasks and trajectories) of a file, streamed. ``fmt`` overrides detection. With a shard (a format that
    is ``sharded``), only that shard's items."""
    name = fmt or detect(path)
    if name not in FORMATS:
        raise FormatError(path, "", f"unknown format {name!r}; known: {', '.join(FORMATS)}")
    if shard is None:
        yield from FORMATS[name].read(path, source_model=source_model)
    elif sharded(name):
        yield from FORMATS[name].read(path, source_model=source_model, shard=shard)
    else:
        raise ValueError(f"{name} files are read by one process: they take no shard")


def sharded(fmt: str) -> bool:
    """Whether several processes can read a file of this format together, each its own items (``base.Shard``)."""
    return getattr(FORMATS.get(fmt), "SHARDED", False)
