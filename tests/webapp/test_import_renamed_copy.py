"""A renamed copy of an imported file adds nothing, on every import path (service, CLI, upload page, API); a
source model given on purpose makes a new run; our JSONL export re-imports to identical hashes."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from nlac_core.formats import read
from tests.conftest import TAU_GPT4O, needs_shared
from webapp.api.tokens import do_create_token
from webapp.trajectories import convert
from webapp.trajectories.models import Message, Trajectory
from webapp.trajectories.services.exports import do_export_jsonl
from webapp.trajectories.services.imports import do_import_file, do_store_records
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = [needs_shared, pytest.mark.django_db]


@pytest.fixture
def renamed(tmp_path):
    copy = tmp_path / "gpt-4o-airline .json"  # one trailing space added to the name
    shutil.copyfile(TAU_GPT4O, copy)
    return copy


def counts(project) -> tuple[int, int]:
    return (Trajectory.objects.filter(project=project).count(),
            Message.objects.filter(trajectory__project=project).count())


def test_it_stores_a_renamed_copy_of_a_file_once(tau_project, renamed, tmp_path):
    before = counts(tau_project)
    assert before == (200, 5308)
    assert do_import_file(renamed, tau_project).already_imported  # the same bytes: known by their sha256
    # The same run saved again under other names (so not the same bytes): each episode is found already stored.
    renamed.write_bytes(TAU_GPT4O.read_bytes() + b"\n")
    result = do_import_file(renamed, tau_project)
    assert result.ok and not result.already_imported
    assert result.batch.n_added == 0 and result.batch.n_skipped == 200
    other = tmp_path / "run.json"
    shutil.copyfile(TAU_GPT4O, other)
    call_command("import_trajectories", str(other), project=tau_project.name, format="tau-bench",
                 stdout=io.StringIO())
    assert counts(tau_project) == before
    # The label the first file gave stays; the copies only found their episodes already stored.
    assert set(Trajectory.objects.filter(project=tau_project).values_list("source_model", flat=True)) == {
        "gpt-4o-airline"}


def test_it_stores_the_same_file_with_a_source_model_given_on_purpose_as_a_new_run(tau_project, renamed):
    given = do_import_file(renamed, tau_project, source_model="gpt-4o-2024-08-06")
    assert given.ok and given.batch.n_added == 200
    same = do_import_file(TAU_GPT4O, tau_project, source_model="gpt-4o-2024-08-06")
    assert same.already_imported and Trajectory.objects.filter(project=tau_project).count() == 400
    assert do_import_file(TAU_GPT4O, tau_project, source_model="claude").batch.n_added == 200
    assert Trajectory.objects.filter(project=tau_project).count() == 600


def test_it_reimports_our_export_of_file_name_labels_to_identical_hashes(tau_project, renamed, tmp_path):
    out = io.StringIO()
    do_export_jsonl(Trajectory.objects.filter(project=tau_project), out)
    export = tmp_path / "export.jsonl"
    export.write_text(out.getvalue())
    copy = do_get_or_create_project("copy")
    assert do_import_file(export, copy).batch.n_added == 200
    stored = dict(Trajectory.objects.filter(project=tau_project).values_list("content_hash", "source_model"))
    assert dict(Trajectory.objects.filter(project=copy).values_list("content_hash", "source_model")) == stored
    assert do_import_file(renamed, copy).batch.n_added == 0
    assert do_import_file(export, do_get_or_create_project("copy"), fmt="nlac-jsonl").batch.n_added == 0
    # A row rebuilt into a record hashes to the hash stored with it (steps are named by it).
    t = Trajectory.objects.filter(project=copy).first()
    assert convert.trajectory_record(t, t.messages.order_by("position")).content_hash() == t.content_hash


def test_it_adds_nothing_for_rows_stored_before_file_names_left_the_hash(db, renamed):
    """Rows imported by an earlier version hashed the file-name label; importing the same file again (its bytes
    reformatted, so not skipped by its sha256) still finds them."""
    project = do_get_or_create_project("earlier")
    old = [replace(item.record, source_model_from_file_name=False) for item in read(TAU_GPT4O)]
    do_store_records(project, old, TAU_GPT4O.name, fmt="tau-bench")
    reformatted = renamed.parent / TAU_GPT4O.name
    reformatted.write_bytes(TAU_GPT4O.read_bytes() + b"\n")
    result = do_import_file(reformatted, project)
    assert result.ok and result.batch.n_added == 0 and result.batch.n_skipped == 200


def test_it_stores_a_renamed_copy_once_through_the_upload_page_and_the_api(client_for, personas):
    run = json.dumps(json.loads(TAU_GPT4O.read_text())[:40]).encode()  # under the tests' upload limit
    client = client_for("researcher")
    first = client.post("/import/", {"file": SimpleUploadedFile(TAU_GPT4O.name, run), "project": "tau uploads"},
                        follow=True)
    assert "40 trajectories added" in first.content.decode()
    page = client.post("/import/", {"file": SimpleUploadedFile("gpt-4o-airline .json", run + b" "),
                                    "project": "tau uploads"}, follow=True)
    assert ": 0 trajectories added, 40 already there" in page.content.decode()
    token = do_create_token(personas["researcher"], "tests")[1]
    via_api = client.post("/api/imports", {"file": SimpleUploadedFile("copy of gpt-4o-airline.json", run + b"\n"),
                                           "project": "tau uploads"}, headers={"Authorization": f"Bearer {token}"})
    assert via_api.status_code == 200 and via_api.json()["added"] == 0, via_api.content
    assert Trajectory.objects.filter(project__name="tau uploads").count() == 40
    given = client.post("/import/", {"file": SimpleUploadedFile(TAU_GPT4O.name, run), "project": "tau uploads",
                                     "source_model": "gpt-4o-2024-08-06"}, follow=True)
    assert "40 trajectories added" in given.content.decode()
    assert Trajectory.objects.filter(project__name="tau uploads", source_model="gpt-4o-2024-08-06").count() == 40
