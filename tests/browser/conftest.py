"""Playwright for Python driving Debian's chromium (no browser download)."""

from __future__ import annotations

import os
import shutil

import pytest

# Playwright's sync API runs an event loop in the test thread; the ORM calls the
# tests make between page actions are synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("NLAC_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("NLAC_REQUIRE_BROWSER"):
            pytest.fail(f"no chromium at {CHROMIUM} and NLAC_REQUIRE_BROWSER is set")
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


@pytest.fixture
def page_as(browser, live_server, personas):
    """page_as("annotator") -> a logged-in Playwright page on the live server (``options`` go to the browser
    context: bypass_csp=True, say)."""
    contexts = []

    def login(name: str, javascript: bool = True, **options):
        context = browser.new_context(java_script_enabled=javascript, **options)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", name)
        page.fill("input[name=password]", f"{name}-pw-123")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    yield login
    for c in contexts:
        c.close()


# A real Redis and Celery workers for the browser tests that need them (tests/workers/conftest.py).
from tests.workers.conftest import redis_url, workers  # noqa: E402, F401
