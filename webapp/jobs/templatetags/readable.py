"""``{{ value|readable }}``: a stored JSON value (a job's outputs and config) as a line a person reads, never a
Python repr: ``{"optimal": 11, "suboptimal": 4}`` -> ``optimal 11 · suboptimal 4``, ``None`` -> ``–``,
``True`` -> ``yes``, a list -> its items joined by commas (a long one cut with its count). Escaped as usual."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

MAX_ITEMS = 12


@register.filter
def readable(value: Any) -> str:
    return _text(value, top=True)


def _text(value: Any, top: bool = False) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        parts = [f"{key} {_text(item)}" for key, item in list(value.items())[:MAX_ITEMS]]
        more = f" · … ({len(value)} in all)" if len(value) > MAX_ITEMS else ""
        return (" · " if top else ", ").join(parts) + more if parts else "–"
    if isinstance(value, list | tuple):
        parts = [_text(item) for item in value[:MAX_ITEMS]]
        more = f", … ({len(value)} in all)" if len(value) > MAX_ITEMS else ""
        return (", ".join(parts) + more) if parts else "–"
    return str(value)
