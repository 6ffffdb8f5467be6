"""The export of an empty project (a 0-byte JSONL file) imports as nothing: no error, nothing changed."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from tests.conftest import TAU2_GROK, needs_shared
from webapp.trajectories.models import ImportBatch, Trajectory
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = pytest.mark.django_db


@needs_shared
def test_it_reimports_the_export_of_an_empty_project_as_nothing(tmp_path, capsys):
    do_get_or_create_project("empty")
    full = do_get_or_create_project("full")
    assert do_import_file(TAU2_GROK, full).ok
    out = tmp_path / "empty.jsonl"
    call_command("export_trajectories", str(out), "--project", "empty")
    assert out.read_bytes() == b""
    before = sorted(Trajectory.objects.values_list("project__name", "content_hash"))
    for project in ("empty", "full"):
        call_command("import_trajectories", str(out), "--project", project, "--no-progress")
        assert "empty.jsonl [nlac-jsonl]: 0 trajectories added" in capsys.readouterr().out
    assert sorted(Trajectory.objects.values_list("project__name", "content_hash")) == before
    assert not ImportBatch.objects.filter(status=ImportBatch.FAILED).exists()


def test_it_still_refuses_an_empty_json_file(tmp_path):
    """Whitespace is a JSONL file of no lines, but it is not JSON at all."""
    path = tmp_path / "run.json"
    path.write_text("  \n")
    result = do_import_file(path, do_get_or_create_project("p"))
    assert not result.ok and result.batch.error == "run.json: the file is empty"


def test_it_accepts_the_empty_export_on_the_upload_page(client_for):
    client = client_for("researcher")
    response = client.post("/import/", {"file": SimpleUploadedFile("empty.jsonl", b""), "project": "p"}, follow=True)
    assert response.status_code == 200
    assert "0 trajectories added" in response.content.decode()
    assert not Trajectory.objects.exists()
    refused = client.post("/import/", {"file": SimpleUploadedFile("empty.json", b""), "project": "p"})
    assert refused.status_code == 400 and "empty.json is empty." in refused.content.decode()
