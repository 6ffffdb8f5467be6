"""An upload too big to import in the request goes to an import job: nested 100,000 levels deep, the job fails
naming the record, in flat memory, and stores nothing."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.memory_cap import at_most_extra, nested
from webapp.jobs.models import Job
from webapp.jobs.runners.base import execute
from webapp.trajectories.models import Trajectory

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_fails_the_import_job_of_a_deeply_nested_file(client_for, settings, sent):
    settings.NLAC_IMPORT_IN_REQUEST_BYTES = 1000
    text = '[{"task_id": 1, "reward": 0, "info": {}, "traj": ' + nested(100_000) + "}]"
    client_for("researcher").post("/import/", {"file": SimpleUploadedFile("deep.json", text.encode()), "project": "p"})
    job = Job.objects.get()
    with at_most_extra(200):
        assert execute(job.pk, "w:1") == Job.FAILED
    job.refresh_from_db()
    assert "deep.json, record 0" in job.error and "JSON nested too deeply (more than 512 levels)" in job.error
    assert not Trajectory.objects.exists()
