"""What every format module shares: the error type, typed field access that names
the place of a problem, and streaming JSON readers.

A format module exposes ``NAME``, ``sniff(head: bytes, path) -> bool`` and
``read(path) -> Iterator[Item]``; ``registry.py`` finds them by name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ijson

from nlac_core.records import TaskRecord, TrajectoryRecord


class FormatError(ValueError):
    """A file that cannot be imported, with the place: file, record or line, field."""

    def __init__(self, path: str | Path, where: str, message: str, field: str = ""):
        self.path = str(path)
        self.where = where
        self.field = field
        self.message = message
        place = ", ".join(p for p in (Path(self.path).name, where, f"field '{field}'" if field else "") if p)
        super().__init__(f"{place}: {message}")


@dataclass(frozen=True)
class Item:
    """One thing read from a file, with its place (``record 3``, ``line 12``)."""

    where: str
    index: int
    record: TrajectoryRecord | TaskRecord


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
               dict: "an object", list: "a list", type(None): "null"}


def _describe(types: tuple[type, ...]) -> str:
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


class Obj:
    """A JSON object being read, that knows where it is in the file.

    ``Obj(data, ctx, "traj[2]").req("role", str)`` raises a FormatError naming
    ``field 'traj[2].role'`` when the field is missing or of the wrong type.
    """

    def __init__(self, data: Any, ctx: Context, path: str = ""):
        self.ctx = ctx
        self.path = path
        if not isinstance(data, dict):
            ctx.fail(f"expected an object, got {_json_type(data)}", path)
        self.data: dict[str, Any] = data

    def _field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def req(self, key: str, *types: type) -> Any:
        if key not in self.data:
            self.ctx.fail("missing required field", self._field(key))
        return self._check(key, self.data[key], types)

    def opt(self, key: str, *types: type, default: Any = None) -> Any:
        value = self.data.get(key)
        if value is None:
            return default
        return self._check(key, value, types)

    def choice(self, key: str, allowed: tuple[str, ...], required: bool = True) -> str | None:
        """A string field that must be one of ``allowed`` (a role, a requestor)."""
        value = self.req(key, str) if required else self.opt(key, str)
        if value is not None and value not in allowed:
            self.ctx.fail(f"unknown {key} {value!r} (expected one of {', '.join(allowed)})", self._field(key))
        return value

    def obj(self, key: str, required: bool = True) -> Obj | None:
        if not required and self.data.get(key) is None:
            return None
        return Obj(self.req(key, dict), self.ctx, self._field(key))

    def objs(self, key: str, required: bool = True) -> list[Obj]:
        items = self.req(key, list) if required else (self.opt(key, list) or [])
        return [Obj(v, self.ctx, f"{self._field(key)}[{i}]") for i, v in enumerate(items)]

    def _check(self, key: str, value: Any, types: tuple[type, ...]) -> Any:
        if not types:
            return value
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            ok = True
            if abs(value) > 1e300:
                self.ctx.fail("number out of range", self._field(key))
        if not ok:
            self.ctx.fail(f"expected {_describe(types)}, got {_json_type(value)}", self._field(key))
        if (isinstance(value, int) and not isinstance(value, bool) and str not in types and float not in types
                and not -(2**31) <= value < 2**31):
            self.ctx.fail("integer out of range (32-bit)", self._field(key))
        return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


@dataclass
class Context:
    """Where the reader is: the file and the record or line being read."""

    path: str
    where: str = ""

    def fail(self, message: str, field: str = "") -> None:
        raise FormatError(self.path, self.where, message, field)


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _clean_str(text: str) -> str:
    """NUL (which PostgreSQL text cannot hold) and lone surrogates (which UTF-8 cannot encode)
    become U+FFFD, the replacement character: the rest of the text is kept as it was."""
    return _UNSTORABLE.sub("\ufffd", text) if _UNSTORABLE.search(text) else text


def clean(value: Any, ctx: Context, path: str = "") -> Any:
    """Make freshly parsed JSON storable, in place: fix unstorable characters; refuse
    NaN and infinities (no database stores them as JSON, and a reward of Infinity is a bug)."""
    if isinstance(value, str):
        return _clean_str(value)
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            for key in list(node):
                item = node[key]
                child = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _UNSTORABLE.search(key):
                    del node[key]
                    key = _clean_str(key)
                    node[key] = item
                if isinstance(item, str):
                    node[key] = _clean_str(item)
                elif isinstance(item, float) and not math.isfinite(item):
                    ctx.fail(f"{item} is not a number a database can store", child)
                elif isinstance(item, (dict, list)):
                    stack.append((item, child))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = _clean_str(item)
                elif isinstance(item, float) and not math.isfinite(item):
                    ctx.fail(f"{item} is not a number a database can store", f"{where}[{i}]")
                elif isinstance(item, (dict, list)):
                    stack.append((item, f"{where}[{i}]"))
        elif isinstance(node, float) and not math.isfinite(node):
            ctx.fail(f"{node} is not a number a database can store", where)
    return value


def record(raw: Any, ctx: Context, path: str = "") -> Obj:
    """A top-level record of a file: cleaned, then read through :class:`Obj`."""
    return Obj(clean(raw, ctx, path), ctx, path)


def loads(text: str | bytes, path: str | Path, where: str) -> Any:
    """json.loads whose every failure is a FormatError naming the place."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8-sig")
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(path, where, f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except UnicodeDecodeError as exc:
        raise FormatError(path, where, f"not UTF-8 text (byte {exc.start})") from exc
    except RecursionError as exc:
        raise FormatError(path, where, "JSON nested too deeply") from exc
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise FormatError(path, where, f"unreadable JSON value: {exc}") from exc


def top_level_kinds(path: str | Path, keys: tuple[str, ...]) -> dict[str, str]:
    """The JSON type ('start_array', 'string', ...) of each top-level key found, read in
    one streaming pass that stops once every key has been seen."""
    found: dict[str, str] = {}
    with open(path, "rb") as f:
        _skip_bom(f)
        try:
            for prefix, event, _ in ijson.parse(f):
                if prefix in keys and event != "map_key" and prefix not in found:
                    found[prefix] = event
                    if len(found) == len(keys):
                        break
        except (ijson.JSONError, UnicodeDecodeError, RecursionError, ValueError) as exc:
            raise FormatError(path, "", f"malformed JSON: {exc}") from exc
    return found


def require_lists(path: str | Path, required: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> None:
    """Fail unless each required top-level key, and each optional one that is present, holds a list."""
    kinds = top_level_kinds(path, required + optional)
    for key in required + optional:
        kind = kinds.get(key)
        if kind is None and key in optional:
            continue
        if kind != "start_array":
            got = "missing" if kind is None else f"{kind.replace('start_', '').replace('map', 'object')}"
            raise FormatError(path, "top level", f"expected a list, got {got}", key)


def _skip_bom(f) -> None:
    if f.read(3) != b"\xef\xbb\xbf":
        f.seek(0)


def head_bytes(path: str | Path, size: int = 4096) -> bytes:
    with open(path, "rb") as f:
        return f.read(size)


def first_json_char(head: bytes) -> str:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return chr(text[0]) if text else ""


def stream_array(path: str | Path, prefix: str = "item") -> Iterator[Any]:
    """Items of a (possibly huge) JSON array, one at a time, floats as floats."""
    with open(path, "rb") as f:
        _skip_bom(f)
        try:
            yield from ijson.items(f, prefix, use_float=True)
        except ijson.JSONError as exc:
            raise FormatError(path, "", f"malformed JSON: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise FormatError(path, f"byte {exc.start}", "the file is not UTF-8 text") from exc
        except (RecursionError, ValueError) as exc:
            raise FormatError(path, "", f"unreadable JSON: {exc}") from exc


def stream_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line of a JSONL file."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            yield lineno, loads(raw, path, f"line {lineno}")


def parse_arguments(raw: Any, ctx: Context, field: str) -> dict[str, Any]:
    """Tool-call arguments as a dict: OpenAI sends a JSON string, tau2 a dict."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            ctx.fail(f"tool-call arguments are not valid JSON: {getattr(exc, 'msg', exc)}", field)
        if not isinstance(value, dict):
            ctx.fail(f"tool-call arguments must be a JSON object, got {_json_type(value)}", field)
        return clean(value, ctx, field)
    ctx.fail(f"expected an object or a JSON string, got {_json_type(raw)}", field)
    raise AssertionError  # unreachable: fail() raises


def content_text(value: Any, ctx: Context, field: str) -> str | None:
    """Message content as text: a string, null, or a list of OpenAI/Inspect content parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for i, part in enumerate(value):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                text = part.get("text", part.get("reasoning", ""))
                if not isinstance(text, str):
                    ctx.fail("content part text must be a string", f"{field}[{i}].text")
                parts.append(text)
            else:
                ctx.fail(f"expected a content part, got {_json_type(part)}", f"{field}[{i}]")
        return "\n".join(parts)
    ctx.fail(f"expected a string, null or a list of parts, got {_json_type(value)}", field)
    raise AssertionError
