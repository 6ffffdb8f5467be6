"""A real Celery worker process, a real Redis broker, the test database."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import ROOT
from webapp.trajectories.models import Project

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def database_url() -> str:
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.fixture
def worker():
    """A worker on a queue of its own, so that no other worker can take the test's tasks."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings", "DATABASE_URL": database_url(),
           "REDIS_URL": settings.CELERY_BROKER_URL}
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", queue, "--pool", "solo",
         "-l", "warning", "-n", f"{queue}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    yield queue
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_it_runs_a_task_on_a_real_worker_that_reads_the_database(worker):
    from workers.tasks.health import ping

    Project.objects.create(name="one", slug="one")
    Project.objects.create(name="two", slug="two")
    result = ping.apply_async(queue=worker).get(timeout=60)
    assert result["projects"] == 2
    assert result["worker"].split(":")[1] != str(os.getpid())  # it ran in the worker process
