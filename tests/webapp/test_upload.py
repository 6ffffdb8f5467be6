"""The upload page: researchers import files in the browser; bad files change nothing."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import TAU2_GROK, needs_shared
from webapp.trajectories.models import ImportBatch, Project, Trajectory

pytestmark = pytest.mark.django_db


@needs_shared
def test_it_imports_an_uploaded_run_and_says_what_it_added(client_for):
    client = client_for("researcher")
    upload = SimpleUploadedFile(TAU2_GROK.name, TAU2_GROK.read_bytes())
    response = client.post("/import/", {"file": upload, "project": "tau2 airline"}, follow=True)
    assert response.status_code == 200
    assert "Imported" in response.content.decode() and "20 trajectories added" in response.content.decode()
    assert Trajectory.objects.filter(project__name="tau2 airline").count() == 20
    batch = ImportBatch.objects.get(status="succeeded")
    assert batch.created_by.username == "researcher" and batch.file_name == TAU2_GROK.name
    again = client.post("/import/", {"file": SimpleUploadedFile(TAU2_GROK.name, TAU2_GROK.read_bytes()),
                                     "project": "tau2 airline"}, follow=True)
    assert "already imported" in again.content.decode()
    assert Trajectory.objects.count() == 20


def test_it_rejects_a_malformed_upload_with_the_place_and_changes_nothing(client_for):
    client = client_for("researcher")
    lines = json.dumps({"messages": [{"role": "user", "content": "ok"}]}) + "\n" + '{"messages": [{"role": 3}]}\n'
    response = client.post("/import/", {"file": SimpleUploadedFile("runs.jsonl", lines.encode()), "project": "p"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "Nothing was imported." in body
    assert "runs.jsonl, line 2, field &#x27;messages[0].role&#x27;: expected a string, got an integer" in body
    assert Trajectory.objects.count() == 0


def test_it_refuses_an_oversized_upload_before_reading_it(client_for, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    response = client_for("researcher").post(
        "/import/", {"file": SimpleUploadedFile("big.json", b"[" + b" " * 2000 + b"]"), "project": "p"})
    assert response.status_code == 400
    assert "uploads are limited to" in response.content.decode()
    assert not Project.objects.exists()


def test_it_refuses_an_unrecognised_file(client_for):
    response = client_for("researcher").post(
        "/import/", {"file": SimpleUploadedFile("notes.txt", b"just words"), "project": "p"})
    assert response.status_code == 400 and "could not detect the format" in response.content.decode()
    assert Trajectory.objects.count() == 0
