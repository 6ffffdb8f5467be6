"""A researcher launches a supervised rollout from the UI, reads its summary, follows the episodes with
interventions to the one the critic changed, and an annotator corrects the critic's verdict on that step.

The job runs in a thread of the test process with the scripted actor, user and critic of the job tests (what
is tested is the pages); tests/workers runs supervised jobs on a real worker with the embedded model.
"""

from __future__ import annotations

import threading

import pytest
from playwright.sync_api import expect

from tests.conftest import needs_shared
from tests.webapp.jobs.test_supervised_jobs import models  # noqa: F401 - the scripted backends
from webapp.jobs.models import Job, StepCritique

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_shared]


@pytest.fixture
def no_broker(monkeypatch):
    from webapp.jobs.services import lifecycle

    monkeypatch.setattr(lifecycle, "enqueue", lambda job: None)


def test_it_launches_a_supervised_rollout_and_shows_its_interventions(page_as, personas, models,  # noqa: F811
                                                                      no_broker):
    from webapp.jobs.runners.base import execute

    critic_row, _ = models
    page = page_as("researcher")
    page.goto(page.url + "jobs/new/supervised-rollout/")
    page.fill("input[name=split]", "all")
    page.fill("input[name=tasks]", "4")
    page.fill("input[name=max_turns]", "6")
    page.fill("input[name=temperature]", "0")
    page.fill("input[name=forced_sample]", "1")
    page.fill("input[name=project]", "supervised in chromium")
    page.select_option("select[name=critic_checkpoint]", str(critic_row.pk))
    page.click("#launch-form button[type=submit]")
    expect(page.locator("#job-status")).to_have_text("queued")
    job = Job.objects.get()
    assert job.config["critic_checkpoint"] == critic_row.pk and job.config["both_arms"] is True

    worker = threading.Thread(target=execute, args=(job.pk, "browser-test:1"))
    worker.start()
    expect(page.locator("#job-status")).to_have_text("succeeded", timeout=120_000)
    worker.join(timeout=30)
    expect(page.locator("#supervision-arms tr:has(td)")).to_have_count(2)
    expect(page.locator("#supervision-pairs")).to_contain_text("4 paired episodes")
    expect(page.locator("#supervision-counterfactuals")).to_contain_text("Helpfulness")
    kinds = page.locator("#supervision-counterfactual-kinds tr:has(td)")
    expect(kinds).to_have_count(2)
    expect(kinds.nth(1)).to_contain_text("forced on approved steps")
    expect(kinds.nth(1).locator("td").nth(2)).to_have_text("1.000 of 1")  # the forced one broke a success

    page.click("#with-interventions")
    row = page.locator("tr", has_text="update_task_1")
    expect(row).to_have_count(1)  # its supervised episode; the filter keeps only episodes the critic changed
    row.locator("a").first.click()
    rejected = page.locator("del.rejected-proposal").first
    expect(rejected).to_contain_text("create_task")
    expect(page.locator("main")).to_contain_text("do not create tasks nobody asked for")

    critique = StepCritique.objects.filter(job=job, trajectory__task__external_id="update_task_1",
                                           verdict="suboptimal").order_by("round").first()
    # the critic's interventions, queued for the annotator (a queue over the steps it intervened on)
    from webapp.annotation.services.queues import QueueSpec, check_create_queue

    check_create_queue(personas["researcher"], "critic interventions", critique.trajectory.project,
                       QueueSpec(verdict="suboptimal"), 1, [personas["annotator"]])
    annotator = page_as("annotator")
    annotator.goto(annotator.url + f"trajectories/{critique.trajectory_id}/steps/{critique.step_index}/"
                   f"?critique={critique.pk}")
    expect(annotator.locator(f"#critique-{critique.pk}")).to_contain_text("rejected: this proposal never ran")
    annotator.select_option("select[name=verdict]", "optimal")
    annotator.fill("textarea[name=suggestion]", "creating the task was what the user wanted")
    annotator.click("#save")
    expect(annotator.locator("main")).to_contain_text("Saved")
    revision = critique.annotations.get().head
    assert revision.verdict == "optimal" and revision.suggestion == "creating the task was what the user wanted"
