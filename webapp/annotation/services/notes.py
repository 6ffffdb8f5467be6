"""Importing human notes (a CSV keyed by simulation or trajectory id) as annotations of trajectories.

All rows are matched before anything is written: a row that matches no trajectory of the project
(or names a step the trajectory does not have) fails the whole file with its line, and nothing changes.
Idempotent: a note already stored on its trajectory (the same step, author and text, ``notes_csv.note_key``,
from any file, deleted or not) is not added again, so importing a file twice adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction

from nlac_core.formats.base import FormatError
from nlac_core.formats.notes_csv import NoteRow, note_key, read_notes
from webapp.annotation.models import Note
from webapp.annotation.services import audit
from webapp.trajectories.models import Message, Project, Trajectory

MAX_NOTES_BYTES = 10 * 1024 * 1024
MAX_REPORTED = 20
LOOKUP_CHUNK = 500


class NotesError(ValueError):
    def __init__(self, problems: list[str]):
        shown = problems[:MAX_REPORTED]
        more = f" (and {len(problems) - len(shown)} more)" if len(problems) > len(shown) else ""
        super().__init__("; ".join(shown) + more)
        self.problems = problems


@dataclass(frozen=True)
class NotesResult:
    n_notes: int
    n_trajectories: int
    n_already: int = 0  # rows of the file whose note was already stored (or repeated in the file)


def check_import_notes(actor, project: Project, file_name: str, data: bytes) -> NotesResult:
    if len(data) > MAX_NOTES_BYTES:
        raise NotesError([f"{file_name}: {len(data)} bytes, more than the {MAX_NOTES_BYTES} allowed for notes"])
    try:
        rows = read_notes(file_name, data)
    except FormatError as e:
        raise NotesError([str(e)]) from None
    ids = {r.key for r in rows}
    trajectories = Trajectory.objects.filter(project=project)
    if rows[0].key_column == "simulation_id":
        found = dict(trajectories.filter(external_id__in=ids).values_list("external_id", "pk"))
    else:
        numeric = [int(k) for k in ids if k.isascii() and k.isdecimal() and len(k) < 18]
        found = {str(pk): pk for pk in trajectories.filter(pk__in=numeric).values_list("pk", flat=True)}
    steps = set(Message.objects.filter(trajectory_id__in=found.values(), step_index__isnull=False)
                .values_list("trajectory_id", "step_index"))
    problems = []
    for row in rows:
        pk = found.get(row.key)
        if pk is None:
            problems.append(f"{file_name}, line {row.line}: no trajectory with {row.key_column} {row.key[:80]!r} "
                            f"in project {project.name!r}")
        elif row.step_index is not None and (pk, row.step_index) not in steps:
            problems.append(f"{file_name}, line {row.line}: trajectory {pk} has no agent step {row.step_index}")
    if problems:
        raise NotesError(problems)
    try:
        return do_import_notes(actor, file_name, rows, found)
    except IntegrityError:  # the unique key: another import of the same notes committed meanwhile
        raise NotesError([f"{file_name}: some of these notes were imported at the same moment by another "
                          "request; nothing was imported from this file, import it again to add the rest"]) from None


@transaction.atomic
def do_import_notes(actor, file_name: str, rows: list[NoteRow], trajectory_ids: dict[str, int]) -> NotesResult:
    keyed = [(trajectory_ids[r.key], note_key(r.step_index, r.author, r.text), r) for r in rows]
    ids = sorted({t for t, _, _ in keyed})
    stored: set[tuple[int, str]] = set()
    for start in range(0, len(ids), LOOKUP_CHUNK):  # a bounded IN list (SQLite caps query parameters)
        stored.update(Note.objects.filter(trajectory_id__in=ids[start:start + LOOKUP_CHUNK]).exclude(content_key="")
                      .values_list("trajectory_id", "content_key"))
    fresh = []
    for trajectory_id, key, row in keyed:
        if (trajectory_id, key) not in stored:
            stored.add((trajectory_id, key))
            fresh.append(Note(trajectory_id=trajectory_id, step_index=row.step_index, text=row.text,
                              author_name=row.author, source_file=file_name[:500], source_line=row.line,
                              imported_by=actor, content_key=key))
    notes = Note.objects.bulk_create(fresh, batch_size=1000)
    used = {n.trajectory_id for n in notes}
    if notes:
        audit.record(actor, "notes.import", notes[0], trajectory_id=None,
                     after={"file": file_name, "notes": len(notes), "trajectories": len(used),
                            "already_imported": len(rows) - len(notes)})
    return NotesResult(len(notes), len(used), len(rows) - len(notes))
