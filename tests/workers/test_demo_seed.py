"""The demo loop `make run` seeds (webapp/demo.py), through a real Redis: a critique job handed to the broker, an
overlap-2 queue for the two demo annotators, one accepted and one pending correction; a second run adds nothing;
NLAC_DEMO=0 seeds only users and data; production settings refuse it; a run with the broker down launches the job
on the next run. (tests/browser/test_first_run_in_chromium.py runs it with a worker and a browser.)"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import needs_shared
from webapp import demo
from webapp.annotation.models import Annotation, Queue, Revision
from webapp.jobs.models import Job
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_shared]


def everything() -> tuple[int, ...]:
    return (Job.objects.count(), Queue.objects.count(), Annotation.objects.count(), Revision.objects.count(),
            Trajectory.objects.count())


def test_it_seeds_the_loop_once_and_a_second_run_adds_nothing(settings, workers):
    settings.NLAC_DEMO = True
    said: list[str] = []
    loop = demo.seed(said.append)

    job = Job.objects.get()
    assert loop.job == job and job.kind == "critique" and job.status == Job.QUEUED and job.enqueued_at is not None
    assert job.created_by.username == "researcher"
    queue = Queue.objects.get()
    assert queue == loop.queue and queue.overlap == 2 and queue.n_items == len(demo.STEPS) * demo.N_EPISODES
    assert sorted(queue.assignees.values_list("username", flat=True)) == ["annotator", "annotator2"]
    critiqued = {(t, s) for t in job.selection["trajectory_ids"] for s in demo.STEPS}
    assert set(queue.items.values_list("trajectory_id", "step_index")) == critiqued  # what the job critiques
    assert not Trajectory.objects.filter(pk__in=job.selection["trajectory_ids"], success=True).exists()
    states = sorted(Annotation.objects.values_list("author__username", "state"))
    assert states == [("annotator2", Annotation.ACCEPTED), ("annotator2", Annotation.SUBMITTED)]
    assert any(f"critique job {job.pk}" in line for line in said), said

    before = everything()
    again: list[str] = []
    assert demo.seed(again.append).job == job
    assert everything() == before
    assert any("already imported" in line for line in again), again


def test_it_seeds_only_users_and_data_with_the_demo_off(settings, workers):
    settings.NLAC_DEMO = False
    said: list[str] = []
    assert demo.seed(said.append) is None
    assert Trajectory.objects.exists() and not Job.objects.exists() and not Queue.objects.exists()
    assert not Annotation.objects.exists()
    assert any("NLAC_DEMO=0" in line for line in said), said


def test_it_refuses_the_demo_under_production_settings(settings, workers):
    settings.NLAC_PRODUCTION = True
    with pytest.raises(CommandError, match="never seeded under production settings"):
        call_command("seed_demo")
    assert everything() == (0, 0, 0, 0, 0)


def test_it_launches_the_demo_job_on_the_next_run_when_the_broker_was_down(settings, own_redis):
    settings.NLAC_DEMO = True
    own_redis.stop()
    said: list[str] = []
    loop = demo.seed(said.append)
    assert loop.job is None and not Job.objects.exists() and Queue.objects.count() == 1
    assert any("the next `make run` launches it" in line for line in said), said

    own_redis.start()
    loop = demo.seed(lambda line: None)
    assert loop.job == Job.objects.get() and Job.objects.get().enqueued_at is not None
    assert demo.seed(lambda line: None).job == loop.job and Queue.objects.count() == 1
