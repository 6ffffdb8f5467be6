"""Word-level diffs of critique text. Returns segments, not HTML: templates escape them."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass

from nlac_core.metrics import text_similarity

TOKEN = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class Segment:
    op: str  # "same", "ins", "del"
    text: str


def words(text: str) -> list[str]:
    return TOKEN.findall(text or "")


def word_diff(old: str, new: str) -> list[Segment]:
    a, b = words(old), words(new)
    segments: list[Segment] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            segments.append(Segment("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            segments.append(Segment("del", "".join(a[i1:i2])))
        if j2 > j1:
            segments.append(Segment("ins", "".join(b[j1:j2])))
    return segments


def similarity(a: str, b: str) -> float:
    """Share of words in common, order-aware: 1.0 identical, 0.0 disjoint (``nlac_core.metrics``)."""
    return text_similarity(a, b)


def field_diffs(old: dict, new: dict, names) -> list[tuple[str, list[Segment], bool]]:
    """(field, segments, changed) for each named field."""
    rows = []
    for name in names:
        before, after = _text(old.get(name)), _text(new.get(name))
        rows.append((name, word_diff(before, after), before != after))
    return rows


def _text(value) -> str:
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False, indent=1) if value else ""
    if isinstance(value, bool):
        return "yes" if value else ""
    return "" if value is None else str(value)
