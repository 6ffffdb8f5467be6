"""A file nested 100,000 levels deep is refused on every way in (service, command, upload page, API) in flat
memory, naming the record, and stores nothing. It once took 23 GB (1.6 GB for 25,000 levels on the upload page)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from tests.memory_cap import at_most_extra, nested
from webapp.trajectories.models import ImportBatch, Message, Task, Trajectory
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = pytest.mark.django_db

DEEP = nested(100_000)
TOO_DEEP = "JSON nested too deeply (more than 512 levels)"
FILES = {
    "tau-bench": ("run.json", '[{"task_id": 1, "reward": 0, "info": {}, "traj": ' + DEEP + "}]", "run.json, record 0"),
    "tau2-bench": ("tau2.json", '{"info": {}, "tasks": [], "simulations": [{"task_id": "1", "messages": '
                   + DEEP + "}]}", "tau2.json, simulation 0"),
    "inspect-ai": ("log.json", '{"eval": {"run_id": "r"}, "samples": [{"id": 1, "messages": ' + DEEP + "}]}",
                   "log.json, sample 0"),
}


def assert_nothing_stored() -> None:
    assert Trajectory.objects.count() == Message.objects.count() == Task.objects.count() == 0
    assert not ImportBatch.objects.filter(status=ImportBatch.SUCCEEDED).exists()


@pytest.mark.parametrize("fmt", list(FILES))
def test_it_refuses_a_deeply_nested_file_in_the_import_service(tmp_path, fmt):
    name, text, place = FILES[fmt]
    path = tmp_path / name
    path.write_text(text)
    project = do_get_or_create_project("p")
    with at_most_extra(200):
        result = do_import_file(path, project)
    assert not result.ok and result.batch.error.startswith(place) and TOO_DEEP in result.batch.error, result.batch.error
    assert_nothing_stored()


def test_it_refuses_a_deeply_nested_file_on_the_command_line(tmp_path, capsys):
    name, text, place = FILES["tau2-bench"]
    path = tmp_path / name
    path.write_text(text)
    with at_most_extra(200), pytest.raises(CommandError, match="1 of 1 files failed"):
        call_command("import_trajectories", str(path), "--project", "p", "--no-progress")
    err = capsys.readouterr().err
    assert place in err and TOO_DEEP in err
    assert_nothing_stored()


def test_it_refuses_a_deeply_nested_upload_on_the_import_page(client_for):
    name, text, place = FILES["tau-bench"]
    client = client_for("researcher")
    with at_most_extra(200):
        response = client.post("/import/", {"file": SimpleUploadedFile(name, text.encode()), "project": "p"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "Nothing was imported." in body and place in body and TOO_DEEP in body
    assert_nothing_stored()


def test_it_refuses_a_deeply_nested_file_sent_to_the_api(personas):
    from django.test import Client

    from webapp.api.tokens import do_create_token

    name, text, place = FILES["inspect-ai"]
    client = Client(headers={"Authorization": f"Bearer {do_create_token(personas['researcher'], 'tests')[1]}"})
    with at_most_extra(200):
        response = client.post("/api/imports", {"file": SimpleUploadedFile(name, text.encode()), "project": "p"})
    assert response.status_code == 400, response.content
    assert response.json()["detail"].startswith(place) and TOO_DEEP in response.json()["detail"]
    assert_nothing_stored()
