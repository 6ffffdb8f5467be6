"""Large uploads are imported by a job on the cpu queue: the request returns at once, the job imports."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import TAU2_GROK, needs_shared
from webapp.jobs.configs import ConfigError
from webapp.jobs.models import Job
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle
from webapp.trajectories.models import ImportBatch, Trajectory

pytestmark = [pytest.mark.django_db(transaction=True), needs_shared]


def test_it_queues_a_large_upload_and_the_job_imports_it(client_for, settings, sent):
    settings.NLAC_IMPORT_IN_REQUEST_BYTES = 1000  # every real file is "large" here
    client = client_for("researcher")
    response = client.post("/import/", {"file": SimpleUploadedFile(TAU2_GROK.name, TAU2_GROK.read_bytes()),
                                        "project": "tau2 airline (job)"})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.kind == "import" and job.queue == "cpu" and sent == [job.pk]
    assert not Trajectory.objects.exists()  # nothing imported in the request
    assert execute(job.pk, "w:1") == Job.SUCCEEDED
    job.refresh_from_db()
    assert job.outputs["added"] == 20 and Trajectory.objects.filter(project__name="tau2 airline (job)").count() == 20
    assert ImportBatch.objects.get().created_by.username == "researcher"
    assert not [p for p in settings.UPLOAD_DIR.rglob("*") if p.is_file()]  # the saved upload is removed


def test_it_fails_the_job_with_the_place_of_a_malformed_file(client_for, settings, sent):
    settings.NLAC_IMPORT_IN_REQUEST_BYTES = 10
    bad = b'[{"task_id": 1, "reward": "high", "traj": []}]' * 3
    client_for("researcher").post("/import/", {"file": SimpleUploadedFile("bad.json", bad), "project": "p"})
    job = Job.objects.get()
    assert execute(job.pk, "w:1") == Job.FAILED
    job.refresh_from_db()
    assert job.error.startswith("ValueError: bad.json") and not Trajectory.objects.exists()


def test_it_reads_only_files_under_the_upload_folder(personas):
    with pytest.raises(ConfigError, match="only files saved under the upload folder"):
        lifecycle.check_create_job(personas["researcher"], "import", {"path": "/etc/passwd", "project": "p"})
    assert not Job.objects.exists()


@pytest.mark.parametrize(("field", "value", "limit"), [("source_model", "m" * 201, "200"),
                                                       ("file_name", "f" * 501 + ".json", "500")])
def test_it_names_the_over_long_field_of_an_import(personas, settings, field, value, limit):
    saved = settings.UPLOAD_DIR / "x.json"
    with pytest.raises(ConfigError, match=f"at most {limit} characters") as refused:
        lifecycle.check_create_job(personas["researcher"], "import",
                                   {"path": str(saved), "project": "p", field: value})
    assert refused.value.field == field and not Job.objects.exists()
