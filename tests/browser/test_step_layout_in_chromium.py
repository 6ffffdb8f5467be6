"""The step page's first screen, measured in a real chromium at 1400x900: the action under review, the model's
critique and the correction form are all inside it, above whatever the conversation before the step holds (the
whole airline policy and a dozen messages here), and the long parts are collapsed with a preview. Screenshots go
to var/test-artefacts/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TAU_GPT4O, imported, needs_shared
from tests.webapp.annotation.conftest import add_critique
from webapp.annotation.services import queues
from webapp.annotation.services.queues import QueueSpec
from webapp.trajectories.models import Message

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_shared]

ARTEFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artefacts"
SCREEN = {"width": 1400, "height": 900}
# As long as the critic's default budgets let a section be (64 tokens each: about 300 characters).
FUTURE = ("The agent will look up the reservation, find that the basic economy fare cannot be changed, and tell the "
          "user so; the user will then ask to cancel instead, the agent will refuse because the booking is older "
          "than a day and has no insurance, and the episode ends without the change the user asked for. Reward 0.")
REASON = ("It calls the tool before confirming the details with the user, which the airline policy requires for any "
          "action that changes a booking; the arguments also name the wrong flight date, so even a successful call "
          "would change the wrong segment and the user would have to ask for it to be undone.")
SUGGEST = ("List the flights to be changed with their dates and the new fare, ask the user for an explicit yes, and "
           "only then call update_reservation_flights with the cabin kept as it was and the saved credit card.")


def box(page, selector: str) -> dict:
    found = page.locator(selector)
    assert found.count() == 1, f"{selector}: {found.count()} elements"
    return found.bounding_box()


def inside(b: dict) -> bool:
    return b["x"] >= 0 and b["y"] >= 0 and b["x"] + b["width"] <= SCREEN["width"] and \
        b["y"] + b["height"] <= SCREEN["height"]


@pytest.fixture
def deep_step(personas):
    """A failed gpt-4o episode's step whose action is a tool call, with 10+ messages and the policy before it, a
    model critique at the default budgets and a queue item of the annotator's."""
    project = imported("tau-bench airline", TAU_GPT4O)
    calls = (Message.objects.filter(trajectory__project=project, trajectory__success=False, role="assistant",
                                    step_index__gte=4, position__gte=10).exclude(tool_calls=[])
             .select_related("trajectory").order_by("trajectory_id", "position"))
    message = calls.first()
    trajectory = message.trajectory
    critique = add_critique(trajectory, message.step_index, "harmful", future=FUTURE, success_prob=0.2)
    critique.record = {**critique.record, "reasoning": REASON, "suggestion": SUGGEST}
    critique.save(update_fields=["record"])
    queue = queues.check_create_queue(personas["researcher"], "deep steps", project, QueueSpec(verdict="harmful"), 1,
                                      [personas["annotator"]])
    return trajectory, message, critique, queue.items.get()


def test_it_shows_action_critique_and_form_in_the_first_screen(page_as, deep_step):
    trajectory, message, critique, item = deep_step
    page = page_as("annotator", viewport=SCREEN)
    page.goto(page.url.rstrip("/") + f"/trajectories/{trajectory.pk}/steps/{message.step_index}/?queue_item={item.pk}")
    page.wait_for_selector("#revision-form")
    assert page.evaluate("window.scrollY") == 0
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTEFACTS / "step-page-1400x900.png"))

    action, judged, form = box(page, "#action"), box(page, f"#critique-{critique.pk}"), box(page, "#revision-form")
    for name, b in (("action", action), ("critique", judged), ("form", form)):
        assert inside(b), f"the {name} is not inside the first 1400x900 screen: {b}"
    assert action["y"] < judged["y"], "the action comes before its critique"
    save = box(page, "#save-next")
    assert inside(save), f"Save and next is off the first screen: {save}"
    # What is judged is there in full: the tool call's name and arguments, and every field of the critique.
    for call in message.tool_calls:
        assert call["name"] in page.inner_text("#action")
    text = page.inner_text(f"#critique-{critique.pk}")
    assert FUTURE[:60] in text and REASON[:60] in text and SUGGEST[:60] in text

    # The conversation before the step scrolls in its own pane, ending at the message before the step; the policy
    # is one collapsed line with a preview.
    context = page.locator("#context")
    assert context.evaluate("e => e.scrollHeight > e.clientHeight"), "the conversation before the step does not scroll"
    assert context.evaluate("e => getComputedStyle(e).overflowY") in ("auto", "scroll")
    assert inside(box(page, "#context"))
    policy = page.locator("#context details.collapsed-body").first
    assert policy.get_attribute("open") is None
    assert len(policy.locator("summary").inner_text()) < 220

    # Reachable by keyboard: the pane takes the focus (and scrolls with the arrows), a collapsed part opens with Enter.
    page.focus("#context")
    before = context.evaluate("e => e.scrollTop")
    assert before > 0, "the pane opens at its end, the messages just before the action"
    page.keyboard.press("PageUp")
    page.wait_for_function("before => document.getElementById('context').scrollTop < before", arg=before)
    summary = page.locator("#context details summary").first
    summary.focus()
    page.keyboard.press("Enter")
    assert page.locator("#context details").first.get_attribute("open") is not None


def test_it_stacks_the_step_and_the_form_first_on_a_narrow_screen(page_as, deep_step):
    trajectory, message, critique, item = deep_step
    page = page_as("annotator", viewport={"width": 900, "height": 1000})
    page.goto(page.url.rstrip("/") + f"/trajectories/{trajectory.pk}/steps/{message.step_index}/?queue_item={item.pk}")
    page.wait_for_selector("#revision-form")
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTEFACTS / "step-page-900x1000.png"))
    action, form, context = box(page, "#action"), box(page, "#revision-form"), box(page, "#context")
    after = box(page, "#step-more")
    assert action["y"] < 1000, f"the action is not on the first screen: {action}"
    assert action["y"] < box(page, f"#critique-{critique.pk}")["y"] < form["y"] < after["y"] < context["y"], \
        "one column: the step and its critique, the form, what happened next, the conversation before"
