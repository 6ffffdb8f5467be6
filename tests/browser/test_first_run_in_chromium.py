"""The first run, as a new user meets it: a fresh database seeded as `make run` seeds it (webapp/demo.py, the demo
on), a real Celery worker with the embedded model taking the demo critique job, and each demo login's first screen
in chromium: the annotator lands on a queue with items and a Start button, the reviewer on a correction to review,
the researcher (and the admin) on the demo critique job. Then the loop closes: once the worker has written the
first critiques, the annotator's Start opens a step that shows the model's critique beside the form. Screenshots of
the first screens go to var/test-artefacts/first-screen-*.png."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import TAU_GPT4O, needs_shared
from tests.workers.conftest import wait_for
from webapp import demo
from webapp.accounts.services import DEMO_USERS
from webapp.annotation.models import Annotation
from webapp.jobs.models import Job, StepCritique
from webapp.jobs.services import lifecycle

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_shared]

ARTEFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artefacts"
PASSWORDS = {d.username: d.password for d in DEMO_USERS}
SCREEN = {"width": 1400, "height": 900}


@pytest.fixture
def demo_loop(settings, workers):
    """`make run`'s seed on a fresh database, the demo on, one real worker on the test's own queue."""
    assert TAU_GPT4O.parent.parent == settings.NLAC_SHARED_DATA or settings.NLAC_SHARED_DATA.is_dir()
    settings.NLAC_DEMO = True
    workers.start()
    said: list[str] = []
    loop = demo.seed(said.append)
    assert loop is not None and loop.job is not None, said
    yield loop, said
    job = Job.objects.get(pk=loop.job.pk)
    if job.status in (Job.QUEUED, Job.RUNNING, Job.WAITING):
        lifecycle.do_request_cancel(job)  # so the worker stops between chunks, not at the end of the job


def first_screen(browser, live_server, username: str):
    """Log in as a demo user with the password `make run` printed; the page they land on."""
    context = browser.new_context(viewport=SCREEN)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORDS[username])
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTEFACTS / f"first-screen-{username}.png"))
    return page


def test_it_shows_each_demo_login_its_work_first_and_the_critiques_arrive(browser, live_server, demo_loop):
    loop, said = demo_loop
    assert any("critique job" in line for line in said) and any("queue" in line for line in said), said

    annotator = first_screen(browser, live_server, "annotator")
    card = annotator.locator(".queue-card").filter(has_text=demo.QUEUE_NAME)
    assert card.count() == 1, annotator.inner_text("main")[:600]
    assert card.locator(".remaining").inner_text() == str(loop.queue.n_items) == str(len(demo.STEPS) * demo.N_EPISODES)
    assert card.locator("button.start").is_visible()
    assert card.bounding_box()["y"] < SCREEN["height"], "the annotator's queue is below the first screen"

    reviewer = first_screen(browser, live_server, "reviewer")
    assert reviewer.inner_text("#n-waiting") == "1"
    waiting = Annotation.objects.get(state=Annotation.SUBMITTED)
    row = reviewer.locator("#home-waiting tbody tr")
    assert row.count() == 1 and "annotator2" in row.inner_text() and waiting.head.reasoning[:40] in row.inner_text()
    assert "accepted (gold)" in reviewer.inner_text("#home-reviewer")

    job = f"critique #{loop.job.pk}"
    for name in ("researcher", "admin"):
        page = first_screen(browser, live_server, name)
        shown = page.locator("#home-running, #home-recent").filter(has_text=job)
        assert shown.count() == 1, f"{name} does not see {job} first: {page.inner_text('#home-researcher')[:400]}"
        assert shown.bounding_box()["y"] < SCREEN["height"]
        page.locator(f"a:has-text('{job}')").click()
        page.wait_for_url(f"**/jobs/{loop.job.pk}/")

    # The worker writes the critiques two steps at a time; the annotator's Start lands on a step that shows its
    # critique beside the form once the job has reached it.
    wait_for(lambda: StepCritique.objects.filter(job=loop.job).exists(), 300, "the demo job's first critiques")
    annotator.reload()
    critiqued = annotator.locator(".queue-card dt:has-text('with a model critique') + dd").inner_text()
    assert int(critiqued.split("/")[0]) >= 1, critiqued
    annotator.locator(".queue-card button.start").click()
    annotator.wait_for_selector("#revision-form")
    trajectory, step = (int(x) for x in re.search(r"/trajectories/(\d+)/steps/(\d+)/", annotator.url).groups())
    wait_for(lambda: StepCritique.objects.filter(trajectory_id=trajectory, step_index=step).exists(), 300,
             f"the critique of trajectory {trajectory} step {step}")
    annotator.reload()
    assert annotator.locator("#model-critique .critique").is_visible()
    assert annotator.locator("#revision-form").is_visible()
    annotator.screenshot(path=str(ARTEFACTS / "first-screen-annotator-step.png"))
