"""What every format module shares: the error type, typed field access that names
the place of a problem, the JSON decoder and its limits, and the JSONL reader (big JSON
files are read by ``json_stream``).

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

from nlac_core.records import TaskRecord, TrajectoryRecord

# How deep a record may nest objects and arrays, the record itself being level 1. Real trajectories use a
# dozen levels; past a few hundred a file is an attack on the parser (and json.loads hits Python's recursion
# limit near 1,000), so every reader refuses it with the same message.
MAX_DEPTH = 512
TOO_DEEP = f"JSON nested too deeply (more than {MAX_DEPTH} levels)"


class HugeInteger:
    """An integer literal too long for int() (Python refuses over 4,300 digits): the decoder returns this
    in its place so that :func:`clean` can refuse it naming its field, like any other bad number."""

    def __init__(self, digits: int):
        self.digits = digits


# How many numbers the decoder has met that :func:`clean` refuses (NaN, infinities, floats that overflow, integers
# too long for int()): a reader compares it before and after decoding a record to know whether the record holds
# any (``decodes_clean``). It only grows: a decode that met one sees it changed, even if another thread's decode
# counted too (the record is then merely walked by ``clean`` for nothing).
_odd_numbers = 0


def odd_numbers() -> int:
    return _odd_numbers


def _odd(value: Any) -> Any:
    global _odd_numbers
    _odd_numbers += 1
    return value


def _parse_int(text: str) -> int | HugeInteger:
    try:
        return int(text)
    except ValueError:
        return _odd(HugeInteger(len(text.lstrip("-"))))


def _parse_float(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else _odd(value)


def _parse_constant(name: str) -> float:
    return _odd(float(name))  # NaN, Infinity, -Infinity: what the json module gives, counted


# The one JSON decoder of every format (a JSONL line, a record of a JSON array, a .traj file), so that a value
# means the same everywhere.
DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


class FormatError(ValueError):
    """A file that cannot be imported, with the place: file, record or line, field."""

    def __init__(self, path: str | Path, where: str, message: str, field: str = ""):
        self.path = str(path)
        self.where = where
        self.field = field
        self.message = message
        place = ", ".join(p for p in (Path(self.path).name, where, f"field '{field}'" if field else "") if p)
        super().__init__(f"{place}: {message}")


@dataclass
class Shard:
    """The part of a file one of ``n`` reader processes parses: blocks of ``block`` items dealt round robin, block
    ``i`` to reader ``i mod n`` (items counted in the order ``read`` yields them). A format that takes a shard
    (``SHARDED = True``) asks ``take()`` once per item, before parsing it, and skips the items that are not its
    own; ``block_of_last()`` says which block the item just taken is in."""

    k: int = 0
    n: int = 1
    block: int = 1
    seen: int = 0

    def take(self) -> bool:
        mine = (self.seen // self.block) % self.n == self.k
        self.seen += 1
        return mine

    def block_of_last(self) -> int:
        return (self.seen - 1) // self.block


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


def short_field(path: str) -> str:
    """A field path fit for a message, however deep the field."""
    return path if len(path) <= 80 else path[:80] + "…"


def clean(value: Any, ctx: Context, path: str = "") -> Any:
    """Make freshly parsed JSON storable, in place: fix unstorable characters; refuse NaN and infinities (no
    database stores them as JSON, and a reward of Infinity is a bug), integers too long to read, and nesting
    deeper than MAX_DEPTH (the value itself being level 1).

    A pending container carries a link to its parent's (``(parent link, key or index)``), not its path: the
    path is spelled out only for an error. Building every child's path up front cost memory of key length
    times children (a 1 MB record with a 1 MiB key over thousands of children asked for gigabytes)."""
    if isinstance(value, str):
        return _clean_str(value)
    stack: list[tuple[Any, Any, int]] = [(value, None, 1)]
    while stack:
        node, link, depth = stack.pop()
        if isinstance(node, (dict, list)) and depth > MAX_DEPTH:
            ctx.fail(TOO_DEEP, _spell(path, link))
        if isinstance(node, dict):
            for key in list(node):
                item = node[key]
                if isinstance(key, str) and _UNSTORABLE.search(key):
                    del node[key]
                    key = _clean_str(key)
                    node[key] = item
                if isinstance(item, str):
                    node[key] = _clean_str(item)
                elif isinstance(item, (dict, list)):
                    stack.append((item, (link, key), depth + 1))
                elif isinstance(item, _NUMBERS_TO_CHECK):
                    _check_number(item, ctx, path, (link, key))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = _clean_str(item)
                elif isinstance(item, (dict, list)):
                    stack.append((item, (link, i), depth + 1))
                elif isinstance(item, _NUMBERS_TO_CHECK):
                    _check_number(item, ctx, path, (link, i))
        else:
            _check_number(node, ctx, path, link)
    return value


def _spell(root: str, link: Any) -> str:
    """The field path of a link chain (``traj[3].content``), each key cut to 80 characters, then shortened."""
    parts: list[Any] = []
    while link is not None:
        link, part = link
        parts.append(part)
    out = root
    for part in reversed(parts):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = short_field(str(part))
            out = f"{out}.{key}" if out else key
    return short_field(out)


_NUMBERS_TO_CHECK = (float, HugeInteger)


def _check_number(value: Any, ctx: Context, root: str, link: Any) -> None:
    """Refuse a number no database stores; the field is spelled out only then."""
    if isinstance(value, float) and not math.isfinite(value):
        ctx.fail(f"{value} is not a number a database can store", _spell(root, link))
    if isinstance(value, HugeInteger):
        ctx.fail(f"an integer of {value.digits} digits is out of range", _spell(root, link))


# What in a JSON text can put NUL or a lone surrogate into decoded strings: their \\u escapes (text decoded as
# strict UTF-8 by a decoder that refuses raw control characters holds neither otherwise).
_BAD_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def decodes_clean(text: str, start: int, end: int, numbers_before: int) -> bool:
    """Whether the JSON in ``text[start:end]``, just decoded by :data:`DECODER` (which had counted
    ``numbers_before`` odd numbers before), gave values that :func:`clean` would return as they are: no odd
    number, no escape of NUL or of a surrogate, and too few brackets to nest past MAX_DEPTH. Then the walk over
    every value, most of the cost of reading a record, can be skipped. Conservative: a record that merely holds
    many brackets goes through :func:`clean` as before."""
    if _odd_numbers != numbers_before:
        return False
    if text.count("[", start, end) + text.count("{", start, end) > MAX_DEPTH:
        return False
    return text.find("\\u", start, end) < 0 or _BAD_ESCAPE.search(text, start, end) is None


def record(raw: Any, ctx: Context, path: str = "", *, clean_already: bool = False) -> Obj:
    """A top-level record of a file: cleaned (unless its text was found to need nothing of :func:`clean`:
    ``decodes_clean``), then read through :class:`Obj`."""
    return Obj(raw if clean_already else clean(raw, ctx, path), ctx, path)


def loads(text: str | bytes, path: str | Path, where: str) -> Any:
    """One whole JSON document, decoded by :data:`DECODER`, whose every failure is a FormatError naming the place."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8-sig")
        return DECODER.decode(text)
    except json.JSONDecodeError as exc:
        msg = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg  # "Unterminated string starting at"
        raise FormatError(path, where, f"malformed JSON: {msg} at line {exc.lineno} column {exc.colno}") from exc
    except UnicodeDecodeError as exc:
        raise FormatError(path, where, f"not UTF-8 text (byte {exc.start})") from exc
    except RecursionError as exc:
        raise FormatError(path, where, TOO_DEEP) from exc


def head_bytes(path: str | Path, size: int = 4096) -> bytes:
    with open(path, "rb") as f:
        return f.read(size)


def first_json_char(head: bytes) -> str:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return chr(text[0]) if text else ""


def stream_lines(path: str | Path, shard: Shard | None = None) -> Iterator[tuple[int, int, Any, bool]]:
    """``(index, line number, parsed JSON, whether it decodes_clean)`` for each non-blank line of a JSONL file, the
    index counting non-blank lines; with a shard, only its lines are decoded and given."""
    shard = shard or Shard()
    index = -1
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            index += 1
            if not shard.take():
                continue
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                text = raw  # loads names the byte
            before = odd_numbers()
            value = loads(text, path, f"line {lineno}")
            yield index, lineno, value, isinstance(text, str) and decodes_clean(text, 0, len(text), before)


def parse_arguments(raw: Any, ctx: Context, field: str) -> dict[str, Any]:
    """Tool-call arguments as a dict: OpenAI sends a JSON string, tau2 a dict."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        before = odd_numbers()
        try:
            value = DECODER.decode(raw)
        except json.JSONDecodeError as exc:
            ctx.fail(f"tool-call arguments are not valid JSON: {exc.msg}", field)
        except RecursionError:
            ctx.fail(f"tool-call arguments: {TOO_DEEP}", field)
        if not isinstance(value, dict):
            ctx.fail(f"tool-call arguments must be a JSON object, got {_json_type(value)}", field)
        return value if decodes_clean(raw, 0, len(raw), before) else clean(value, ctx, field)
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
