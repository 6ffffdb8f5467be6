"""A job started again (reaped after its worker died, or retried) keeps its first start beside the last one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from webapp.jobs.models import Job
from webapp.jobs.services import lifecycle


@pytest.fixture
def job(tau_project, personas):
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    return lifecycle.check_create_job(personas["researcher"], "critique", {"steps": "first"}, {"trajectory_ids": ids})


def first_claim_an_hour_ago(job: Job):
    lifecycle.claim(job.pk, "host-a:1")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(started_at=an_hour_ago, first_started_at=an_hour_ago,
                                         lease_expires_at=timezone.now() - timedelta(seconds=1))
    return Job.objects.get(pk=job.pk).started_at


def test_it_keeps_the_first_start_of_a_reaped_job_and_shows_both_on_its_page(job, client_for):
    first = first_claim_an_hour_ago(job)
    assert lifecycle.do_reap() == [job.pk]
    lifecycle.claim(job.pk, "host-b:2")
    job.refresh_from_db()
    assert job.first_started_at == first and job.started_at > first + timedelta(minutes=59)
    page = client_for("researcher").get(f"/jobs/{job.pk}/").content.decode()
    assert f'first started <span id="job-first-started">{first:%Y-%m-%d %H:%M:%S}</span>' in page
    assert f'this attempt started <span id="job-started">{job.started_at:%Y-%m-%d %H:%M:%S}</span>' in page


def test_it_keeps_the_first_start_across_a_retry(job):
    first = first_claim_an_hour_ago(job)
    lifecycle.do_finish(job.pk, "host-a:1", Job.FAILED, error="boom")
    lifecycle.do_retry(job)
    lifecycle.claim(job.pk, "host-b:2")
    job.refresh_from_db()
    assert job.attempts == 2 and job.first_started_at == first and job.started_at > first


def test_it_sets_the_first_start_at_the_first_claim(job):
    claimed = lifecycle.claim(job.pk, "host-a:1")
    assert claimed.first_started_at == claimed.started_at is not None
