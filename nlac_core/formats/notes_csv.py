"""Human notes in a CSV file, one note per row, keyed by the trajectory they are about.

Columns (header row required, names case-insensitive):

- ``simulation_id`` (tau2-bench's simulation id, or any run's own trajectory id) or ``trajectory_id``
  (NLAC Studio's id): which trajectory the note is about; one of the two is required;
- ``note`` (also ``notes``, ``text``, ``comment``): the note itself, required, non-empty;
- ``step`` (optional): the agent step the note is about;
- ``author`` (optional): who wrote it.

Reading never matches notes to trajectories (that needs the database): it returns typed rows and
raises ``FormatError`` naming the line and column of the first malformed row.
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

from nlac_core.formats.base import FormatError
from nlac_core.records import canonical_json

KEY_COLUMNS = ("simulation_id", "trajectory_id")
TEXT_COLUMNS = ("note", "notes", "text", "comment")
MAX_NOTE_CHARS = 20_000
MAX_ROWS = 100_000


@dataclass(frozen=True)
class NoteRow:
    line: int  # the file line the row starts on (the header is line 1)
    key_column: str  # "simulation_id" or "trajectory_id"
    key: str
    text: str
    step_index: int | None = None
    author: str = ""


def note_key(step_index: int | None, author: str, text: str) -> str:
    """A note's identity on its trajectory: the same words by the same author about the same step are one
    note, whichever file (or line of it) they came in, so importing a file again adds nothing."""
    return hashlib.sha256(canonical_json([step_index, author, text]).encode()).hexdigest()


def read_notes(path: str | Path, data: bytes | None = None) -> list[NoteRow]:
    raw = data if data is not None else Path(path).read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FormatError(path, f"byte {e.start}", "not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [(h or "").strip().lower() for h in (reader.fieldnames or [])]
    if not header:
        raise FormatError(path, "line 1", "an empty file: expected a header row")
    reader.fieldnames = header
    key_column = next((c for c in KEY_COLUMNS if c in header), None)
    if key_column is None:
        raise FormatError(path, "line 1", f"no key column: one of {', '.join(KEY_COLUMNS)} is required")
    text_column = next((c for c in TEXT_COLUMNS if c in header), None)
    if text_column is None:
        raise FormatError(path, "line 1", f"no note column: one of {', '.join(TEXT_COLUMNS)} is required")
    rows: list[NoteRow] = []
    try:
        for record in reader:
            line = reader.line_num
            if len(rows) >= MAX_ROWS:
                raise FormatError(path, f"line {line}", f"more than {MAX_ROWS} notes in one file")
            if None in record:
                raise FormatError(path, f"line {line}", "more cells than header columns")
            key = (record.get(key_column) or "").strip()
            note = (record.get(text_column) or "").strip()
            if not key and not note and not any((v or "").strip() for v in record.values()):
                continue  # a blank line
            if not key:
                raise FormatError(path, f"line {line}", "empty", field=key_column)
            if not note:
                raise FormatError(path, f"line {line}", "empty", field=text_column)
            if len(note) > MAX_NOTE_CHARS:
                raise FormatError(path, f"line {line}", f"longer than {MAX_NOTE_CHARS} characters", field=text_column)
            step = (record.get("step") or "").strip()
            if step and not (step.isascii() and step.isdecimal()):
                raise FormatError(path, f"line {line}", f"not a step number: {step[:40]!r}", field="step")
            rows.append(NoteRow(line, key_column, key, note, int(step) if step else None,
                                (record.get("author") or "").strip()[:200]))
    except csv.Error as e:
        raise FormatError(path, f"line {reader.line_num}", f"malformed CSV: {e}") from None
    if not rows:
        raise FormatError(path, "line 2", "no notes after the header")
    return rows
