"""The Content-Security-Policy in a real chromium: every main page, per role, loads and works (htmx swaps, the
API docs' Swagger UI, the admin) with not one violation reported."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.conftest import needs_shared
from tests.webapp.test_csp import pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_shared]

LISTEN = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " +
                              e.sourceFile + ":" + e.lineNumber);
});
"""


def watch(page) -> list[str]:
    """Violations as chromium reports them: console errors ("Refused to ...") and the DOM event."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if "Content Security Policy" in m.text else None)
    page.add_init_script(LISTEN)
    return seen


def visit(page, url: str, seen: list[str]) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    seen.extend(f"{url}: {v}" for v in page.evaluate("window.__cspViolations || []"))


def test_it_loads_the_login_page_without_violations(browser, live_server):
    context = browser.new_context()
    page = context.new_page()
    seen = watch(page)
    visit(page, f"{live_server.url}/login/", seen)
    context.close()

    assert seen == []


@pytest.mark.parametrize("role", ["annotator", "reviewer", "researcher", "admin"])
def test_it_loads_every_main_page_without_violations(page_as, personas, tau_project, live_server, role):
    personas["admin"].is_staff = True
    personas["admin"].save(update_fields=["is_staff"])
    page = page_as(role)
    seen = watch(page)
    for url in pages(tau_project)[role]:
        visit(page, live_server.url + url, seen)
        if url == "/api/docs":
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("NLAC Studio API")

    # htmx still swaps under the policy (no eval, no injected style): filter the list in place.
    visit(page, f"{live_server.url}/trajectories/", seen)
    page.evaluate("window.__sameDocument = true")
    page.select_option("select[name=outcome]", "failure")
    page.wait_for_url("**outcome=failure**")
    assert page.evaluate("window.__sameDocument") is True
    seen.extend(page.evaluate("window.__cspViolations"))

    assert seen == []
