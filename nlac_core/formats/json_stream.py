"""Big JSON files (an array of records, or an object whose members hold arrays of them), one record at a time.

Each record is parsed by the C JSON decoder that reads a JSONL line (``base.DECODER``), on a window of the
file that grows until the record fits, then slides past it. So a record costs the memory of its own text
and objects, whatever its shape; nesting stops at ``MAX_DEPTH`` (the decoder's recursion limit, then
``base.clean``); and a value means the same thing in every format: lone surrogates become U+FFFD, NaN and
oversized integers are refused naming their field. (ijson's item/prefix paths, used before, built a prefix
string per nesting level for every event: memory quadratic in the depth, 23 GB for 100,000 levels; its C
backend also turned a lone surrogate into ``?`` and named no record in its errors.)

Every error names the record (``record 3``, ``simulation 2``) and the field being read, or the byte offset
when the fault lies between records.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import ijson

from nlac_core.formats.base import (
    DECODER,
    MAX_DEPTH,
    TOO_DEEP,
    FormatError,
    HugeInteger,
    Shard,
    decodes_clean,
    odd_numbers,
    short_field,
)

CHUNK = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)|[\[\]{},:]', re.S)
_TAIL = 16  # an error this close to the end of the window may just be a value cut by the window's edge


class ArrayStart:
    """Stands for a top-level member that is an array: its items follow, one event each."""


ARRAY = ArrayStart()


def field_at(text: str, start: int, end: int, prefix: str = "") -> str:
    """The path (``traj[3].content``) being read at ``text[end]`` of a record that starts at ``text[start]``,
    or where its nesting first passes MAX_DEPTH. Only called to word an error, so a plain token scan will do."""
    stack: list[list[Any]] = []  # [is_object, key or index, expecting a key]
    for m in _TOKEN.finditer(text, start, end):
        token = m.group()
        c = token[0]
        if c in "{[":
            if len(stack) >= MAX_DEPTH:
                break
            stack.append([c == "{", None if c == "{" else 0, c == "{"])
        elif c in "}]":
            if stack:
                stack.pop()
        elif c == "," and stack:
            if stack[-1][0]:
                stack[-1][2] = True
            else:
                stack[-1][1] += 1
        elif c == '"' and stack and stack[-1][0] and stack[-1][2]:
            try:
                stack[-1][1] = json.loads(token)
                stack[-1][2] = False
            except ValueError:  # a key cut by the end of the file: the object is the place
                break
    parts = [prefix] if prefix else []
    for is_object, key, _ in stack:
        if is_object and key is not None:
            parts.append(f".{key}" if parts else str(key))
        elif not is_object:
            parts.append(f"[{key}]")
    return short_field("".join(parts))


class _Window:
    """The decoded text of the file from the record being read on, and its byte offset in the file."""

    def __init__(self, f: IO[bytes], path: str | Path):
        self.f = f
        self.path = path
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.base = 0  # byte offset of text[0]
        self.fed = 0  # bytes given to the decoder
        self.eof = False
        self.bad_byte: int | None = None  # offset of the first byte that is not UTF-8, once reached
        self.last = (0, 0, 0)  # (start, end, odd numbers before) of the value last read
        if f.read(3) == codecs.BOM_UTF8:
            self.base = self.fed = 3
        else:
            f.seek(0)

    def offset(self, index: int) -> int:
        return self.base + len(self.text[:index].encode("utf-8"))

    def fail(self, where: str, message: str, field: str = "") -> None:
        raise FormatError(self.path, where, message, field)

    def more(self, where: str, start: int, prefix: str) -> None:
        """Read on, keeping ``text[start:]``; at least double what is kept, so a big record is parsed
        a few times at most, never once per chunk."""
        if self.bad_byte is not None:
            field = field_at(self.text, start, len(self.text), prefix)
            self.fail(where, f"not UTF-8 text (byte {self.bad_byte})", field)
        if start:
            self.base += len(self.text[:start].encode("utf-8"))
            self.text = self.text[start:]
            self.pos -= start
        data = self.f.read(max(CHUNK, len(self.text)))
        pending = len(self.decoder.getstate()[0])
        try:
            self.text += self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            self.text += exc.object[:exc.start].decode("utf-8")
            self.bad_byte = self.fed - pending + exc.start
        self.fed += len(data)
        if not data and self.bad_byte is None:
            self.eof = True

    def peek(self, where: str, prefix: str = "") -> str:
        """The next character that is not white space ("" at the end of the file), without taking it."""
        while True:
            self.pos = _WS.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if self.eof:
                return ""
            self.more(where, self.pos, prefix)

    def value(self, where: str, prefix: str) -> Any:
        """The JSON value at the window's position, read whole."""
        start = self.pos
        while True:
            numbers_before = odd_numbers()
            try:
                value, end = DECODER.raw_decode(self.text, start)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.text) - _TAIL
                if cut and not self.eof:
                    self.more(where, start, prefix)
                    start = self.pos
                    continue
                # the whole file is in: only an error at its very end (or in an open string) is a cut file;
                # a syntax error just before the end is what it is, with its field
                if exc.msg.startswith("Unterminated string") or exc.pos >= len(self.text.rstrip()):
                    end_byte = self.offset(len(self.text))
                    self.fail(where, f"malformed JSON: the file is cut short (it ends at byte {end_byte})",
                              field_at(self.text, start, len(self.text), prefix))
                field = field_at(self.text, start, exc.pos, prefix)
                msg = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg
                self.fail(where, f"malformed JSON: {msg} (byte {self.offset(exc.pos)})", field)
            except RecursionError:
                self.fail(where, TOO_DEEP, field_at(self.text, start, len(self.text), prefix))
            if end == len(self.text) and not self.eof and isinstance(value, (int, float, HugeInteger)):
                self.more(where, start, prefix)  # a number may go on past the window
                start = self.pos
                continue
            self.pos = end
            self.last = (start, end, numbers_before)
            return value

    def last_decodes_clean(self) -> bool:
        """Whether the value last read ``decodes_clean`` (asked only of the values a reader parses)."""
        start, end, numbers_before = self.last
        return decodes_clean(self.text, start, end, numbers_before)

    def expect(self, char: str, where: str, after: str) -> None:
        got = self.peek(where)
        if got != char:
            self.fail(f"byte {self.offset(self.pos)}",
                      f"malformed JSON: expected '{char}' {after}, " + (f"found {got!r}" if got else "the file ends"))
        self.pos += 1


def _array(w: _Window, key: str | None, label: str) -> Iterator[tuple[str | None, int | None, Any]]:
    yield key, None, ARRAY
    if w.peek(f"{label} 0") == "]":
        w.pos += 1
        return
    index = 0
    while True:
        where = f"{label} {index}"
        c = w.peek(where)
        if c in ("]", ""):
            w.fail(f"byte {w.offset(w.pos)}", f"malformed JSON: expected {label} {index} after a comma, "
                   + (f"found {c!r}" if c else "the file ends"))
        yield key, index, w.value(where, f"{key}[{index}]" if key else "")
        c = w.peek(where)
        if c == ",":
            w.pos += 1
            index += 1
        elif c == "]":
            w.pos += 1
            return
        else:
            w.fail(f"byte {w.offset(w.pos)}", f"malformed JSON: expected ',' or ']' after {where}, "
                   + (f"found {c!r}" if c else "the file ends"))


def _label(key: str | None) -> str:
    """What one item of an array is called in errors: a top-level array holds records, ``simulations`` holds
    simulations."""
    if key is None:
        return "record"
    return key[:-1] if key.endswith("s") and len(key) > 1 else f"{key} item"


def _members(w: _Window) -> Iterator[tuple[str | None, int | None, Any]]:
    first = True
    while True:
        c = w.peek("top level")
        if c == "}" and first:
            w.pos += 1
            return
        if c != '"':
            w.fail(f"byte {w.offset(w.pos)}", "malformed JSON: expected a member name in the top-level object, "
                   + (f"found {c!r}" if c else "the file ends"))
        key = w.value("top level", "")
        w.expect(":", key, f"after the member name {key!r}")
        if w.peek(key) == "[":
            w.pos += 1
            yield from _array(w, key, _label(key))
        else:
            yield key, None, w.value(key, key)
        first = False
        c = w.peek("top level")
        if c == "}":
            w.pos += 1
            return
        w.expect(",", "top level", f"or '}}' after the member {key!r}")


def events(path: str | Path) -> Iterator[tuple[str | None, int | None, Any]]:
    """``(key, index, value)`` through the file: for a top-level array, ``(None, i, item)``; for each member of a
    top-level object, ``(key, None, value)``, or ``(key, None, ARRAY)`` then ``(key, i, item)`` per item."""
    with open(path, "rb") as f:
        yield from _walk(_Window(f, path))


def _walk(w: _Window) -> Iterator[tuple[str | None, int | None, Any]]:
    c = w.peek("top level")
    if c == "[":
        w.pos += 1
        yield from _array(w, None, _label(None))
    elif c == "{":
        w.pos += 1
        yield from _members(w)
    else:
        w.fail("top level", "expected a JSON array or object, " + (f"found {c!r}" if c else "the file is empty"))
    c = w.peek("top level")
    if c:
        w.fail(f"byte {w.offset(w.pos)}", f"malformed JSON: {c!r} after the end of the top-level value")


def stream_array(path: str | Path, key: str | None = None,
                 shard: Shard | None = None) -> Iterator[tuple[int, Any, bool]]:
    """``(index, item, whether its text decodes_clean)`` for the items of the top-level array (``key=None``) or of
    the array in the top-level member ``key``; pass the flag to ``base.record(..., clean_already=...)``. With a
    shard, only its items (every item is still decoded: its end is where the next one starts)."""
    seen = False
    shard = shard or Shard()
    with open(path, "rb") as f:
        w = _Window(f, path)
        for k, index, value in _walk(w):
            if k == key and index is not None:
                seen = True
                if shard.take():
                    yield index, value, w.last_decodes_clean()
            elif seen:
                return  # past the array: the rest of the file is not read


def member(path: str | Path, key: str) -> Any:
    """The value of one top-level member (None when absent); the file is read only as far as that member."""
    items = None
    for k, index, value in events(path):
        if k == key:
            if value is ARRAY:
                items = []
            elif index is None:
                return value
            else:
                items.append(value)
        elif items is not None:
            return items
    return items


_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}


def top_level_kinds(path: str | Path, keys: tuple[str, ...]) -> dict[str, str]:
    """The JSON type ('array', 'object', 'string', 'number', ...) of each of ``keys`` found at the top level,
    read only until every key has been seen."""
    found: dict[str, str] = {}
    for k, index, value in events(path):
        if k in keys and index is None and k not in found:
            found[k] = "array" if value is ARRAY else _KINDS.get(type(value), "number")
            if len(found) == len(keys):
                break
    return found


def require_lists(path: str | Path, required: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> None:
    """Fail unless each required top-level key, and each optional one that is present, holds a list."""
    kinds = top_level_kinds(path, required + optional)
    for key in required + optional:
        kind = kinds.get(key)
        if kind is None and key in optional:
            continue
        if kind != "array":
            raise FormatError(path, "top level", f"expected a list, got {kind or 'missing'}", key)


def first_member(path: str | Path, key: str, sorted_keys: bool = False) -> Any:
    """The scalar value of ``key`` in the object that starts the file (the first line of a JSONL file), or None,
    however long that object: a flat-memory event scan (ijson's basic events, which carry no prefix) that stops
    at the object's end, at MAX_DEPTH, at the first fault, or (``sorted_keys``: a file whose writer sorts its
    keys) at a key that sorts after ``key``, so that a big single-line JSON file is not read through."""
    depth = 0
    want = False
    with open(path, "rb") as f:
        if f.read(3) != codecs.BOM_UTF8:
            f.seek(0)
        try:
            for event, value in ijson.basic_parse(f, multiple_values=True):
                if event in ("start_map", "start_array"):
                    depth += 1
                    if depth > MAX_DEPTH:
                        return None
                elif event in ("end_map", "end_array"):
                    depth -= 1
                    if depth == 0:
                        return None
                elif depth == 1 and event == "map_key":
                    if sorted_keys and value > key:
                        return None
                    want = value == key
                    continue
                elif want and depth == 1:
                    return value
                want = False
                if depth == 0:
                    return None
        except (ijson.JSONError, UnicodeDecodeError, ValueError):
            return None
    return None
