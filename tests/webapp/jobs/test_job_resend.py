"""The reaper sends again a queued job whose message may be lost (never sent, or sent long ago and unclaimed).

The broker is beside the point here (sends are captured); tests/workers/test_broker_outage.py does the
same with a real Redis stopped, flushed and restarted, and a real worker.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from webapp.jobs.models import Job
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)  # sends happen on commit


@pytest.fixture
def job(tau_project, personas):
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    return lifecycle.check_create_job(personas["researcher"], "critique", {"steps": "first"}, {"trajectory_ids": ids})


def sent_at(job: Job, seconds_ago: float) -> None:
    Job.objects.filter(pk=job.pk).update(enqueued_at=timezone.now() - timedelta(seconds=seconds_ago))


def test_it_sends_a_queued_job_that_never_reached_the_broker(job, sent):
    sent.clear()
    assert lifecycle.do_reap() == [job.pk] and sent == [job.pk]
    assert "never reached the job queue: sent by the reaper" in Job.objects.get(pk=job.pk).log_tail


def test_it_sends_again_a_job_left_queued_past_the_bound_and_no_other(job, personas, sent, settings):
    settings.NLAC_JOB_RESEND_AFTER_S = 60
    recent = lifecycle.check_create_job(personas["researcher"], "critique", {}, job.selection)
    running = lifecycle.check_create_job(personas["researcher"], "critique", {}, job.selection)
    sent_at(job, 61)
    sent_at(recent, 5)
    lifecycle.claim(running.pk, "host-a:1")
    sent.clear()
    assert lifecycle.do_reap() == [job.pk] and sent == [job.pk]
    assert "sent again" in Job.objects.get(pk=job.pk).log_tail
    assert Job.objects.get(pk=recent.pk).status == Job.QUEUED and Job.objects.get(pk=running.pk).attempts == 1


def test_it_backs_off_when_a_job_only_waits_its_turn(job, sent, settings):
    """Sent again 300 s after its first send; then only once the wait since the last send exceeds the time from
    its creation to that send: 600 s, 1,200 s... (log2 of the wait, not one duplicate every 300 s)."""
    settings.NLAC_JOB_RESEND_AFTER_S = 300
    created = timezone.now() - timedelta(seconds=10_000)
    Job.objects.filter(pk=job.pk).update(created_at=created)

    def reap_at(seconds_after_creation: float, last_send: float) -> bool:
        Job.objects.filter(pk=job.pk).update(enqueued_at=created + timedelta(seconds=last_send))
        sent.clear()
        return lifecycle.resend_lost(now=created + timedelta(seconds=seconds_after_creation)) == [job.pk]

    assert reap_at(301, last_send=0)  # the first re-send: 300 s after the first send
    assert not reap_at(301 + 299, last_send=301)  # waited 299 s since, it had waited 301 s before: too soon
    assert reap_at(301 + 302, last_send=301)
    assert not reap_at(3000 + 2999, last_send=3000) and reap_at(3000 + 3001, last_send=3000)


def test_it_sends_again_the_queued_child_of_a_waiting_parent(personas, tau_project, sent, settings):
    settings.NLAC_JOB_RESEND_AFTER_S = 60
    parent = lifecycle.check_create_job(personas["researcher"], "nlac-iteration", {})
    lifecycle.claim(parent.pk, "w:1")
    child = lifecycle.check_create_job(personas["researcher"], "rollout", {"env": "math", "tasks": 1}, parent=parent)
    assert lifecycle.do_wait(parent.pk, "w:1")
    sent_at(child, 600)  # the child's message died with the broker: the parent would wait for ever
    sent.clear()
    assert lifecycle.do_reap() == [child.pk] and sent == [child.pk]
    assert Job.objects.get(pk=parent.pk).status == Job.WAITING


def test_it_lets_a_duplicate_message_start_the_job_only_once(job, sent):
    sent.clear()
    lifecycle.do_reap()
    lifecycle.do_reap()
    assert sent == [job.pk, job.pk]  # two messages for one queued job...
    assert lifecycle.claim(job.pk, "host-a:1") is not None
    assert lifecycle.claim(job.pk, "host-b:2") is None  # ...and only the first claim starts it
    assert Job.objects.get(pk=job.pk).attempts == 1


def test_it_forgets_the_last_send_when_a_job_is_queued_again(job, sent):
    sent_at(job, 5)
    lifecycle.claim(job.pk, "host-a:1")
    lifecycle.do_finish(job.pk, "host-a:1", Job.FAILED, error="boom")
    lifecycle.do_retry(job)
    assert Job.objects.get(pk=job.pk).enqueued_at is None  # not sent since it was queued again


def test_it_sends_lost_jobs_from_the_reap_jobs_command(job, sent):
    sent.clear()
    out = StringIO()
    call_command("reap_jobs", stdout=out)
    assert sent == [job.pk] and f"sent 1 job(s) to the queue: {job.pk}" in out.getvalue()
