"""A job's life through the services: validated config, enqueue on commit, one owner, cancel, retry, reap."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from webapp.jobs.configs import ConfigError
from webapp.jobs.models import Job
from webapp.jobs.services import lifecycle


@pytest.fixture
def job(tau_project, personas):
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    return lifecycle.check_create_job(personas["researcher"], "critique", {"steps": "first"},
                                      {"trajectory_ids": ids})


@pytest.mark.django_db(transaction=True)
def test_it_stores_a_validated_config_and_enqueues_only_after_commit(tau_project, personas, sent):
    from django.db import transaction

    ids = list(tau_project.trajectories.values_list("id", flat=True)[:3])
    with transaction.atomic():
        job = lifecycle.check_create_job(personas["researcher"], "critique", {"k": 2, "temperature": 0.8},
                                         {"trajectory_ids": ids})
        assert sent == []  # nothing reaches the broker before the row is committed
    assert sent == [job.pk]
    assert job.status == Job.QUEUED and job.queue == "gpu" and job.config_version == 2  # v2: a named endpoint
    assert job.config["k"] == 2 and job.config["mode"] == "sectioned" and job.selection["trajectory_ids"] == ids
    assert job.created_by == personas["researcher"]


@pytest.mark.parametrize("kind, config, selection, field, message", [
    ("critique", {"k": 3}, None, "temperature", "k > 1 futures need sampling"),
    ("critique", {"chunk_size": 0}, None, "chunk_size", "between 1 and 256"),
    ("critique", {"mode": "poetry"}, None, "mode", "expected one of sectioned, free, free_zero_shot"),
    ("critique", {"steps": "middle"}, None, "steps", "expected all, first, last"),
    ("critique", {"temprature": 0.5}, None, "temprature", "not a setting of a critique job"),
    ("critique", {"backend": "openai"}, None, "endpoint_model", "needs the endpoint's model name"),
    ("critique", {"checkpoint": 999}, None, "checkpoint", "no checkpoint with id 999"),
    ("critique", {}, {}, "selection", "choose trajectories"),
    ("critique", {}, {"trajectory_ids": [10**9]}, "selection.trajectory_ids", "no trajectory with id"),
    ("critique", {}, {"filter": {"outcome": "maybe"}}, "selection.filter.outcome", "Select a valid choice"),
    ("rollout", {"env": "chess"}, None, "env", "expected one of twenty_questions, math, tool_use"),
    ("rollout", {"trials": True}, None, "trials", "expected a whole number"),
    ("train", {}, None, "kind", "unknown job kind 'train'"),
])
def test_it_names_the_field_of_a_bad_config_and_creates_nothing(tau_project, personas, kind, config, selection,
                                                                  field, message):
    if selection is None:
        selection = {"trajectory_ids": [tau_project.trajectories.first().pk]}
    with pytest.raises(ConfigError) as caught:
        lifecycle.check_create_job(personas["researcher"], kind, config, selection)
    assert caught.value.field == field and message in caught.value.message
    assert not Job.objects.exists()


def test_it_freezes_a_filter_into_the_ids_it_matched(tau_project, personas):
    job = lifecycle.check_create_job(personas["researcher"], "critique", {},
                                     {"filter": {"project": tau_project.slug, "outcome": "failure"}})
    failed = list(tau_project.trajectories.filter(success=False).order_by("id").values_list("id", flat=True))
    assert job.selection == {"trajectory_ids": failed, "filter": {"project": tau_project.slug, "outcome": "failure"}}


def test_it_lets_exactly_one_worker_claim_a_job(job):
    first = lifecycle.claim(job.pk, "host-a:1")
    assert first is not None and first.status == Job.RUNNING and first.attempts == 1
    assert first.lease_expires_at > timezone.now()
    assert lifecycle.claim(job.pk, "host-b:2") is None
    assert Job.objects.get(pk=job.pk).worker == "host-a:1"


@pytest.mark.django_db(transaction=True)
def test_it_refuses_writes_from_a_worker_that_lost_the_job(job, sent):
    lifecycle.claim(job.pk, "host-a:1")
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert lifecycle.do_reap() == [job.pk]
    assert Job.objects.get(pk=job.pk).status == Job.QUEUED and sent[-1] == job.pk
    assert lifecycle.claim(job.pk, "host-b:2") is not None
    assert not lifecycle.renew_lease(job.pk, "host-a:1")
    assert not lifecycle.do_finish(job.pk, "host-a:1", Job.SUCCEEDED)
    assert lifecycle.do_finish(job.pk, "host-b:2", Job.SUCCEEDED, outputs={"critiques": 2})
    job.refresh_from_db()
    assert job.status == Job.SUCCEEDED and job.attempts == 2 and job.outputs == {"critiques": 2}
    assert "re-queued by the reaper" in job.log_tail


def test_it_leaves_jobs_with_a_live_lease_alone(job):
    lifecycle.claim(job.pk, "host-a:1")
    assert lifecycle.do_reap() == []
    assert Job.objects.get(pk=job.pk).status == Job.RUNNING


def test_it_cancels_a_queued_job_at_once_and_asks_a_running_one_to_stop(job, tau_project, personas):
    assert lifecycle.do_request_cancel(job).status == Job.CANCELLED
    assert lifecycle.claim(job.pk, "host-a:1") is None
    other = lifecycle.check_create_job(personas["researcher"], "critique", {},
                                       {"trajectory_ids": [tau_project.trajectories.first().pk]})
    lifecycle.claim(other.pk, "host-a:1")
    other = lifecycle.do_request_cancel(other)
    assert other.status == Job.RUNNING and other.cancel_requested


@pytest.mark.django_db(transaction=True)
def test_it_retries_a_failed_job_and_not_a_running_one(job, sent):
    lifecycle.claim(job.pk, "host-a:1")
    assert lifecycle.do_retry(job).status == Job.RUNNING  # nothing to retry
    lifecycle.do_finish(job.pk, "host-a:1", Job.FAILED, error="RuntimeError: boom", tb="Traceback ...")
    retried = lifecycle.do_retry(job)
    assert retried.status == Job.QUEUED and retried.error == "" and sent.count(job.pk) == 2


def test_it_keeps_the_whole_log_on_disk_and_a_bounded_tail_in_the_row(job):
    for n in range(2000):
        lifecycle.append_log(job.pk, f"line {n} " + "x" * 20)
    job.refresh_from_db()
    assert len(job.log_tail) <= lifecycle.LOG_TAIL_CHARS and job.log_tail.rstrip().endswith("line 1999 " + "x" * 20)
    assert lifecycle.log_path(job).read_text().count("\n") == 2000


@pytest.mark.django_db(transaction=True)
def test_it_keeps_a_cancel_that_races_with_the_reaper(job, sent):
    lifecycle.claim(job.pk, "host-a:1")
    lifecycle.do_request_cancel(job)  # asked to stop while running...
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert lifecycle.do_reap() == [job.pk]  # ...then its worker died and the reaper re-queued it
    assert lifecycle.claim(job.pk, "host-b:2") is None  # the cancel still holds
    assert Job.objects.get(pk=job.pk).status == Job.CANCELLED


def test_it_fails_a_job_that_lost_its_worker_on_every_attempt(job):
    lifecycle.claim(job.pk, "host-a:1")
    Job.objects.filter(pk=job.pk).update(attempts=lifecycle.max_attempts(),
                                         lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert lifecycle.do_reap() == []
    job.refresh_from_db()
    assert job.status == Job.FAILED and "stopped renewing the lease on each of 5 attempts" in job.error

