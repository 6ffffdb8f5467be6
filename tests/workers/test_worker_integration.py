"""A real Celery worker process, a real Redis broker, the test database."""

from __future__ import annotations

import os

import pytest

from webapp.trajectories.models import Project

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_it_runs_a_task_on_a_real_worker_that_reads_the_database(worker):
    from workers.tasks.health import ping

    Project.objects.create(name="one", slug="one")
    Project.objects.create(name="two", slug="two")
    result = ping.apply_async(queue=worker).get(timeout=60)
    assert result["projects"] == 2
    assert result["worker"].split(":")[1] != str(os.getpid())  # it ran in the worker process
