"""Jobs through a Redis of the test's own that it stops, restarts and loses messages in, and a real worker.

A launch with the broker down answers a clear 503 (page and API) within seconds and leaves no job; once the
broker is back a launch runs. A queued job whose message died in a Redis restart, or whose send failed, is
sent again by the reaper and runs exactly once, however many messages carry it.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.workers.conftest import Workers, _point_celery_at, wait_for
from webapp.jobs.models import Job
from webapp.jobs.services import lifecycle

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

DOWN = "The job queue (the Redis broker) cannot be reached"


@pytest.fixture
def pool(own_redis, settings):
    """Workers on the private Redis (none started yet)."""
    workers = Workers(own_redis.url, settings, lease_s=4)
    yield workers
    workers.stop_all()


def export_ids(project) -> list[int]:
    return list(project.trajectories.order_by("id").values_list("id", flat=True)[:2])


def finished(job: Job):
    job.refresh_from_db()
    return job.status in Job.FINISHED and job


def attempts_logged(job: Job) -> int:
    return lifecycle.log_path(job).read_text().count(" attempt ")


def test_it_answers_a_launch_with_the_broker_down_clearly_and_runs_one_once_it_is_back(
        own_redis, pool, tau_project, client_for, personas):
    from webapp.api.tokens import do_create_token

    ids = ",".join(map(str, export_ids(tau_project)))
    client = client_for("researcher")
    own_redis.stop()
    started = time.monotonic()
    page = client.post("/jobs/new/export/", {"trajectory_ids": ids})
    assert page.status_code == 503 and time.monotonic() - started < 10
    assert DOWN in page.content.decode() and "no export job was launched; try again" in page.content.decode()
    token = do_create_token(personas["researcher"], "tests")[1]
    answer = client.post("/api/jobs", {"kind": "export", "selection": {"trajectory_ids": export_ids(tau_project)}},
                         content_type="application/json", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 503 and answer.json()["detail"].startswith(DOWN)
    assert not Job.objects.exists()  # nothing half-launched: the researcher simply tries again

    own_redis.start()
    pool.start()
    page = client.post("/jobs/new/export/", {"trajectory_ids": ids})
    assert page.status_code == 302
    job = wait_for(lambda: finished(Job.objects.get()), 120, "the export job on the worker")
    assert job.status == Job.SUCCEEDED and job.attempts == 1, job.error


def test_it_sends_again_a_job_whose_message_died_in_a_redis_restart_and_runs_it_once(
        own_redis, pool, tau_project, personas, settings):
    job = lifecycle.check_create_job(personas["researcher"], "export", {}, {"trajectory_ids": export_ids(tau_project)})
    assert own_redis.queue_length(pool.queue) == 1
    own_redis.restart()  # no persistence: the message is gone, the row still says queued
    pool.start()
    time.sleep(3)
    assert Job.objects.get(pk=job.pk).status == Job.QUEUED  # nothing would ever run it
    settings.NLAC_JOB_RESEND_AFTER_S = 0
    assert lifecycle.do_reap() == [job.pk]
    lifecycle.do_reap()  # a second message for the same job, if the worker has not claimed it yet
    job = wait_for(lambda: finished(job), 120, "the re-sent job to finish")
    assert job.status == Job.SUCCEEDED and job.attempts == 1, job.error
    time.sleep(2)  # let a duplicate message reach the worker: it must not start the job again
    job.refresh_from_db()
    assert job.attempts == 1 and attempts_logged(job) == 1 and job.status == Job.SUCCEEDED


def test_it_keeps_a_retried_job_queued_while_the_broker_is_down_and_runs_it_when_back(
        own_redis, pool, tau_project, personas):
    job = lifecycle.check_create_job(personas["researcher"], "export", {}, {"trajectory_ids": export_ids(tau_project)})
    lifecycle.do_request_cancel(job)
    own_redis.stop()
    job = lifecycle.do_retry(Job.objects.get(pk=job.pk))  # a send that fails after the row is queued again
    assert job.status == Job.QUEUED and job.send_error and job.enqueued_at is None
    assert lifecycle.do_reap() == []  # the reaper does not crash on a broker that is down; the job waits
    assert "not sent to the job queue" in Job.objects.get(pk=job.pk).log_tail
    own_redis.start()
    pool.start()
    assert lifecycle.do_reap() == [job.pk]
    job = wait_for(lambda: finished(job), 120, "the job sent once the broker was back")
    assert job.status == Job.SUCCEEDED and job.attempts == 1, job.error


def test_it_answers_within_seconds_when_the_broker_host_accepts_but_never_answers(redis_url, tau_project, client_for):
    """A hung Redis (or a host that swallows packets) must not hold the web request: connect and read timeouts."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel completes the handshake; nobody ever reads or answers
    _point_celery_at(f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
    answers = []
    client = client_for("researcher")
    ids = ",".join(map(str, export_ids(tau_project)))
    asker = threading.Thread(target=lambda: answers.append(client.post("/jobs/new/export/", {"trajectory_ids": ids})),
                             daemon=True)
    try:
        started = time.monotonic()
        asker.start()
        asker.join(timeout=30)
        assert answers, "the launch was still waiting on the silent broker after 30 s"
        assert answers[0].status_code == 503 and DOWN in answers[0].content.decode()
        assert time.monotonic() - started < 15 and not Job.objects.exists()
    finally:
        _point_celery_at(redis_url)
        silent.close()
