"""Our own JSONL: export -> import round-trips exactly."""

import io

import pytest

from nlac_core.formats import nlac_jsonl, read
from tests.conftest import TAU2_GROK, TAU_ERROR, TAU_GPT4O, needs_shared
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import do_export_jsonl
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = [needs_shared, pytest.mark.django_db]


def export(project) -> str:
    out = io.StringIO()
    do_export_jsonl(Trajectory.objects.filter(project=project), out)
    return out.getvalue()


def test_it_round_trips_real_runs_through_our_jsonl(tmp_path):
    first = ""
    for path in (TAU_GPT4O, TAU_ERROR, TAU2_GROK):  # one project each: task ids are per benchmark
        original = do_get_or_create_project(f"original {path.name}")
        assert do_import_file(path, original).ok
        text = export(original)
        # The export holds exactly what the source file said.
        assert nlac_jsonl.loads_all(text) == [i.record for i in read(path) if hasattr(i.record, "messages")]
        first += text
    assert len(first.splitlines()) == 221

    path = tmp_path / "export.jsonl"
    path.write_text(first)
    copy = do_get_or_create_project("copy")
    result = do_import_file(path, copy)
    assert result.ok and result.batch.format == "nlac-jsonl" and result.batch.n_added == 221
    assert export(copy) == first
    hashes = set(Trajectory.objects.exclude(project=copy).values_list("content_hash", flat=True))
    assert set(Trajectory.objects.filter(project=copy).values_list("content_hash", flat=True)) == hashes
    # Importing our export of the tau2 run into its original project adds nothing: same content, same hash.
    tau2_only = tmp_path / "tau2.jsonl"
    tau2_only.write_text(export(original))
    assert do_import_file(tau2_only, original).batch.n_added == 0


def test_it_names_the_line_and_field_of_a_hand_edited_export(tmp_path):
    project = do_get_or_create_project("p")
    assert do_import_file(TAU2_GROK, project).ok
    lines = export(project).splitlines()
    lines[4] = lines[4].replace('"trial":0', '"trial":"zero"')
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(lines))
    result = do_import_file(path, do_get_or_create_project("q"))
    assert result.batch.error == "edited.jsonl, line 5, field 'trial': expected an integer, got a string"
