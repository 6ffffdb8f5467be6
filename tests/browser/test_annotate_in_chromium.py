"""The annotator's flow in a real Chromium: keyboard-only correction in a queue, saved, diffed,
still there after a reload; two browsers on the same annotation get the conflict view and merge
without losing either text. Screenshots of the step view go to var/test-artefacts/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.webapp.annotation.conftest import add_critique, fields
from webapp.annotation.models import Annotation, Draft, Revision
from webapp.annotation.services import queues, revisions
from webapp.annotation.services.queues import QueueSpec
from webapp.annotation.services.revisions import Target

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTEFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artefacts"


@pytest.fixture
def step(db):
    from tests.conftest import TAU2_GROK, imported
    project = imported("tau2-bench airline", TAU2_GROK)
    trajectory = project.trajectories.filter(success=False, n_steps__gte=3).order_by("id").first()
    critique = add_critique(trajectory, 1, "optimal", future="the agent books the flight <b>at once</b>")
    return project, trajectory, critique


def shoot(page, name: str) -> None:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTEFACTS / f"{name}.png"), full_page=True)


def test_it_corrects_a_critique_with_the_keyboard_only(page_as, personas, step):
    project, trajectory, critique = step
    queue = queues.check_create_queue(personas["researcher"], "harsh critic", project, QueueSpec(verdict="optimal"),
                                      1, [personas["annotator"]])
    page = page_as("annotator")
    page.goto(page.url.rstrip("/") + f"/queues/{queue.pk}/")
    page.click("#start")
    page.wait_for_selector("#revision-form")
    assert "<b>at once</b>" in page.inner_text(f"#critique-{critique.pk}")  # escaped, shown as text
    page.keyboard.press("?")
    assert page.is_visible("#shortcuts")
    page.keyboard.press("?")
    page.keyboard.press("e")
    assert page.evaluate("document.activeElement.name") == "predicted_future"
    page.keyboard.press("End")
    page.keyboard.type(" but the fare class forbids it")
    expect(page.locator("#draft-status")).to_have_text(re.compile(r"^\s*Draft kept"))  # no eval under the CSP
    assert Draft.objects.get(user=personas["annotator"]).fields["predicted_future"].endswith("forbids it")
    page.keyboard.press("Escape")
    page.keyboard.press("3")
    assert page.input_value("#verdict") == "harmful"
    shoot(page, "annotate-step-editing")
    page.keyboard.press("s")
    page.wait_for_selector("#saved-notice")
    assert "forbids it" in page.inner_html("#diffs")
    assert "<ins>" in page.inner_html("#diffs")
    shoot(page, "annotate-step-saved")
    revision = Revision.objects.get()
    assert revision.verdict == "harmful" and revision.predicted_future.endswith("but the fare class forbids it")
    page.reload()
    assert page.input_value("textarea[name=predicted_future]").endswith("fare class forbids it")
    assert page.input_value("#verdict") == "harmful"
    assert queue.items.get().n_done == 1 and not Draft.objects.exists()  # saving retires the draft


def test_it_shows_two_browsers_the_conflict_and_merges_both_texts(page_as, personas, step):
    project, trajectory, critique = step
    queues.check_create_queue(personas["researcher"], "q", project, QueueSpec(verdict="optimal"), 1,
                              [personas["annotator"]])  # annotators correct the steps of their queues
    first = revisions.check_save_revision(personas["annotator"], Target(trajectory, 1, critique), fields(), None)
    annotation = Annotation.objects.get()
    mine = page_as("annotator")
    theirs = page_as("reviewer")
    base = mine.url.rstrip("/")
    mine.goto(f"{base}/trajectories/{trajectory.pk}/steps/1/?critique={critique.pk}")
    theirs.goto(f"{base}/trajectories/{trajectory.pk}/steps/1/?annotation={annotation.pk}")
    mine.fill("textarea[name=reasoning]", "annotator: the fare rules forbid the change")
    mine.click("#save")
    mine.wait_for_selector("#saved-notice")
    theirs.fill("textarea[name=suggestion]", "reviewer: offer a refund instead")
    theirs.click("#save")
    theirs.wait_for_selector("#conflict")
    conflict = theirs.inner_text("#conflict")
    assert "annotator: the fare rules forbid the change" in conflict and "reviewer: offer a refund instead" in conflict
    shoot(theirs, "annotate-conflict")
    # merge: keep the annotator's reasoning (theirs) and the reviewer's suggestion (mine)
    theirs.fill("textarea[name=reasoning]", "annotator: the fare rules forbid the change")
    theirs.click("#save")
    theirs.wait_for_selector("#saved-notice")
    annotation.refresh_from_db()
    head = annotation.head
    assert head.reasoning == "annotator: the fare rules forbid the change"
    assert head.suggestion == "reviewer: offer a refund instead"
    assert Revision.objects.count() == 3 and head.parent.parent_id == first.pk
