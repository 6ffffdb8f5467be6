"""What a person does in the browser: log in, filter, page, read a trajectory, import."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.conftest import TAU2_GROK, needs_shared

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_shared]


def test_it_filters_and_pages_with_htmx_without_reloading(page_as, tau_project, live_server):
    page = page_as("reviewer")
    page.click(f"text={tau_project.name}")
    expect(page.locator("#result-count")).to_contain_text("200 trajectories")
    page.evaluate("window.__sameDocument = true")
    page.select_option("select[name=outcome]", "failure")
    expect(page.locator("#result-count")).to_contain_text("116 trajectories")
    assert "outcome=failure" in page.url  # the filter is in the address, shareable
    first_rows = page.locator("#trajectory-table tbody tr td:first-child").all_inner_texts()
    page.click("#next-page")
    expect(page.locator("#result-count")).to_contain_text("116 trajectories")
    # expect(), not wait_for_function("..."): the Content-Security-Policy refuses the eval a string predicate needs
    expect(page.locator("#trajectory-table tbody tr td:first-child").first).not_to_have_text(first_rows[0])
    assert page.evaluate("window.__sameDocument") is True  # swapped in place, no full reload
    assert "cursor=" in page.url


def test_it_steps_through_a_trajectory_with_j_and_k(page_as, tau_project):
    t = tau_project.trajectories.order_by("-n_messages").first()
    page = page_as("reviewer")
    page.goto(page.url + f"trajectories/{t.pk}/")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {t.pk}")
    page.keyboard.press("j")
    expect(page.locator("article.step.current")).to_have_attribute("data-step", "0")
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(page.locator("article.step.current")).to_have_attribute("data-step", "2")
    page.keyboard.press("k")
    expect(page.locator("article.step.current")).to_have_attribute("data-step", "1")
    assert page.url.endswith("#" + page.locator("article.step.current").get_attribute("id"))
    expect(page.locator("pre.args").first).to_be_visible()


def test_it_shows_hostile_text_as_text_and_runs_none_of_it(page_as, tmp_path, db):
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    xss = "<script>window.__pwned = 1; alert(1)</script>"
    record = {"messages": [{"role": "user", "content": f"hi {xss}"},
                           {"role": "assistant", "content": '<img src=x onerror="window.__pwned=2">',
                            "tool_calls": [{"id": "c1", "type": "function", "function": {
                                "name": f"t{xss}", "arguments": json.dumps({"q": xss})}}]}]}
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(record) + "\n")
    project = do_get_or_create_project("hostile")
    do_import_file(path, project)
    t = project.trajectories.get()
    page = page_as("reviewer")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(page.url + f"trajectories/{t.pk}/")
    expect(page.locator("article.msg.user")).to_contain_text(f"hi {xss}")
    expect(page.locator(".tool-name")).to_contain_text(f"t{xss}")
    assert page.evaluate("window.__pwned") is None and dialogs == []


def test_it_works_without_javascript_too(page_as, tau_project):
    page = page_as("reviewer", javascript=False)
    page.goto(page.url + f"projects/{tau_project.slug}/")
    page.select_option("select[name=outcome]", "success")
    page.click("form.filters button[type=submit]")
    expect(page.locator("#result-count")).to_contain_text("84 trajectories")
    page.click("#next-page")
    assert "cursor=" in page.url
    expect(page.locator("#trajectory-table tbody tr")).to_have_count(25)


def test_it_lets_a_researcher_upload_a_run_and_shows_errors_in_place(page_as, tmp_path):
    page = page_as("researcher")
    page.click("nav >> text=Import")
    page.set_input_files("input[name=file]", str(TAU2_GROK))
    page.fill("input[name=project]", "tau2 from the browser")
    page.click("main form button[type=submit]")
    expect(page.locator(".flash")).to_contain_text("20 trajectories added")
    expect(page.locator("#result-count")).to_contain_text("20 trajectories")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user"}]}\n{"messages": 5}\n')
    page.goto(re.sub(r"/projects/.*", "/import/", page.url))
    page.set_input_files("input[name=file]", str(bad))
    page.fill("input[name=project]", "tau2 from the browser")
    page.click("main form button[type=submit]")
    expect(page.locator("#import-error")).to_contain_text("bad.jsonl, line 2, field 'messages': expected a list")
