"""Notes stored before notes had an identity (some twice, by the double-import defect) are keyed by the
migration without losing any; afterwards the same notes imported again add nothing."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from nlac_core.formats.notes_csv import note_key
from webapp.annotation.models import Note
from webapp.annotation.services.notes import check_import_notes

BEFORE = [("annotation", "0001_initial")]
AFTER = [("annotation", "0002_note_content_key")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_it_keys_existing_notes_keeping_the_copies_of_a_double_import(personas):
    from tests.conftest import TAU2_GROK, imported

    project = imported("tau2-bench airline", TAU2_GROK)
    trajectory = project.trajectories.order_by("id").first()
    old = migrate(BEFORE).get_model("annotation", "Note")
    for line in (2, 2, 3):  # the first file imported twice: its line 2 note stored twice
        old.objects.create(trajectory_id=trajectory.pk, step_index=None if line == 3 else 0,
                           text=f"note {line}", author_name="dana", source_file="notes.csv", source_line=line)
    try:
        migrate(AFTER)
        keys = list(Note.objects.order_by("id").values_list("content_key", flat=True))
        assert keys == [note_key(0, "dana", "note 2"), "", note_key(None, "dana", "note 3")]
        result = check_import_notes(personas["researcher"], project, "notes.csv",
                                    f"simulation_id,step,note,author\n{trajectory.external_id},0,note 2,dana\n"
                                    f"{trajectory.external_id},,note 3,dana\n".encode())
        assert (result.n_notes, result.n_already) == (0, 2) and Note.objects.count() == 3
    finally:  # every app back at its latest migration, for the tests that follow
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
