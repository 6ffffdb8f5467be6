"""A researcher launches a critique job from a filtered trajectory list and watches it finish live.

The job runs in a thread of the test process (the task's body, ``execute``) with a scripted model: what is
tested is the page (launch from here, live htmx progress that stops polling, the critiques on the steps);
tests/workers runs the same jobs on real workers with the real model.
"""

from __future__ import annotations

import threading

import pytest
from playwright.sync_api import expect

from tests.conftest import needs_shared
from webapp.jobs.models import Job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_shared]


@pytest.fixture
def no_broker(monkeypatch):
    from webapp.jobs.services import lifecycle

    monkeypatch.setattr(lifecycle, "enqueue", lambda job: None)


@pytest.fixture
def slow_fake_model():
    import time

    from nlac_core.backends.fake import FakeBackend
    from webapp.jobs import loaded_model

    def respond(request):
        time.sleep(0.05)
        return " the user <b>confirms</b>"

    loaded_model.override(lambda config, checkpoint: FakeBackend(responder=respond, scorer=lambda r: 0.0))
    yield
    loaded_model.override(None)


def test_it_launches_a_critique_job_from_the_list_and_watches_it_finish(page_as, tau_project, no_broker,
                                                                        slow_fake_model):
    from webapp.jobs.runners.base import execute

    page = page_as("researcher")
    page.goto(page.url + f"projects/{tau_project.slug}/?outcome=failure&reward_max=0")
    page.click("#launch-critique")
    expect(page.locator("h1")).to_contain_text("New critique job")
    expect(page.locator("main")).to_contain_text("outcome = failure")
    page.fill("input[name=steps]", "first")
    page.fill("input[name=max_steps]", "6")
    page.fill("input[name=chunk_size]", "2")
    page.click("#launch-form button[type=submit]")
    expect(page.locator("#job-status")).to_have_text("queued")
    job = Job.objects.get()
    assert len(job.selection["trajectory_ids"]) == tau_project.trajectories.filter(success=False).count()

    worker = threading.Thread(target=execute, args=(job.pk, "browser-test:1"))
    worker.start()
    expect(page.locator("#job-status")).to_have_text("succeeded", timeout=120_000)  # polled in place; slow CI machines
    worker.join(timeout=30)
    expect(page.locator("#job-progress")).to_have_text("6/6")
    expect(page.locator("#job-live")).not_to_have_attribute("hx-trigger", "every 2s")  # polling stopped
    expect(page.locator("#job-critiques tr:has(td)")).to_have_count(6)  # came with the live partial

    page.locator("#job-critiques a").first.click()
    critique = page.locator(".critique").first
    expect(critique).to_contain_text("the user <b>confirms</b>")  # shown as text, never as markup
    expect(critique).to_contain_text(f"job {job.pk}")


def test_it_refuses_an_annotator_the_jobs_pages(page_as):
    page = page_as("annotator")
    expect(page.locator("header nav")).not_to_contain_text("Jobs")
    response = page.goto(page.url + "jobs/")
    assert response.status == 403
