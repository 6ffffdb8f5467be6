"""Snapshot launches with the broker down: a training or evaluation launch says nothing was launched and leaves
no job; a build keeps its job (the reaper sends it later) and says it waits. The failed send is scripted here
as lifecycle._send records it (tests/workers/test_broker_outage.py stops a real Redis)."""

from __future__ import annotations

import pytest
from django.db import transaction

from tests.webapp.datasets.conftest import build, make_dataset
from webapp.jobs.models import Job
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker_down(monkeypatch):
    def fail(job):
        def record():
            job.send_error = "Error 111 connecting to 127.0.0.1:6379. Connection refused."
        transaction.on_commit(record)
    monkeypatch.setattr(lifecycle, "enqueue", fail)


def test_it_launches_nothing_from_a_snapshot_while_the_broker_is_down(project, gold_set, client_for, broker_down):
    snapshot = build(make_dataset(project, name="down"))
    before = Job.objects.count()
    client = client_for("researcher")
    for path, data in ((f"/snapshots/{snapshot.pk}/train/", {"max_steps": 3, "learning_rate": 1e-5}),
                       (f"/snapshots/{snapshot.pk}/evaluate/", {"split": "test", "max_steps": 5})):
        response = client.post(path, data, follow=True)
        page = response.content.decode()
        assert "The job queue (the Redis broker) cannot be reached" in page and "no " in page
        assert Job.objects.count() == before  # nothing left behind


def test_it_keeps_a_build_and_says_it_waits_while_the_broker_is_down(project, client_for, broker_down):
    dataset = make_dataset(project, name="waits")
    response = client_for("researcher").post(f"/datasets/{dataset.pk}/build/", {}, follow=True)
    page = response.content.decode()
    job = Job.objects.get(kind="build-snapshot")
    assert f"job {job.pk} waits and starts once it is back" in page and job.status == Job.QUEUED
