"""Accessibility in a real chromium: axe-core (package.json pins it; `make axe` installs it) finds no serious or
critical violation on any kind of page a researcher, an annotator, a reviewer or an admin reaches, nor on the
login, 403 and 404 pages; every form control has a label (axe's ``label`` rule, checked to have run on controls);
and keyboard focus is visible where Tab lands.

The pages are found as tests/webapp/test_no_python_reprs.py finds them (tests/webapp/every_page.py): one page of
each URL shape per role. axe is injected as a script tag, so the contexts bypass the Content-Security-Policy
(tests/browser/test_csp_in_chromium.py checks the policy itself)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import TAU_GPT4O, imported, needs_shared
from tests.webapp.every_page import add_every_page, crawl
from webapp.jobs.models import StepCritique

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_shared]

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
BAD = ("serious", "critical")
ROLES = ("researcher", "annotator", "reviewer", "admin")
# Every rule that axe ran on a page, and whether any element was checked by it (passes or violations), so a test
# can tell "no violation" from "never ran".
RUN = """async (tags) => {
  const r = await axe.run(document, {runOnly: {type: "tag", values: tags}});
  const nodes = (list) => list.map((v) => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => ({target: n.target.join(" "), summary: n.failureSummary}))}));
  return {violations: nodes(r.violations), checked: [...r.passes, ...r.violations].map((v) => v.id)};
}"""


@pytest.fixture
def axe():
    if not AXE.is_file():
        if os.environ.get("NLAC_REQUIRE_BROWSER"):
            pytest.fail(f"no axe-core at {AXE} and NLAC_REQUIRE_BROWSER is set (make axe)")
        pytest.skip(f"no axe-core at {AXE} (make axe: npm ci)")
    return str(AXE)


@pytest.fixture
def site(personas):
    """The gpt-4o tau-bench run with every kind of page there (a job, its checkpoint, a queue, an annotation, a
    dataset and snapshot); the admin is staff."""
    project = imported("tau-bench airline", TAU_GPT4O)
    job = add_every_page(project, personas)
    personas["admin"].is_staff = True
    personas["admin"].save(update_fields=["is_staff"])
    return project, StepCritique.objects.get(job=job)


def audit(page, axe: str, url: str, checked: set[str]) -> list[str]:
    """Run axe on ``url``; the serious and critical violations as 'url: rule (impact) help: selector ...'."""
    page.goto(url)
    page.wait_for_load_state("networkidle")  # htmx-loaded parts are there
    page.add_script_tag(path=axe)
    result = page.evaluate(RUN, TAGS)
    checked.update(result["checked"])
    path = url.split("//", 1)[-1].split("/", 1)[-1]
    return [f"/{path}: {v['id']} ({v['impact']}) {v['help']}: " + "; ".join(
                f"{n['target']} [{n['summary'].splitlines()[-1].strip() if n['summary'] else ''}]" for n in v["nodes"])
            for v in result["violations"] if v["impact"] in BAD]


def test_it_finds_no_serious_or_critical_violation_on_any_page(browser, page_as, client_for, live_server, site, axe):
    project, critique = site
    step = f"/trajectories/{critique.trajectory_id}/steps/{critique.step_index}/"
    found: list[str] = []
    checked: set[str] = set()

    context = browser.new_context(bypass_csp=True)  # logged out: the login page
    found += audit(context.new_page(), axe, f"{live_server.url}/login/", checked)
    context.close()

    visited: dict[str, set[str]] = {}
    for role in ROLES:
        urls = set(crawl(client_for(role), per_shape=1))
        urls |= {step, f"{step}?critique={critique.pk}", "/no-such-page/"}  # the editor on a critique; the 404
        if role == "annotator":
            urls.add("/jobs/")  # the 403
        if role == "admin":
            urls.add("/admin/")
            # an admin's pages are a researcher's, with the reviewer's parts: only the others, and the home page
            urls = (urls - visited["researcher"]) | {"/", step}
        visited[role] = urls
        page = page_as(role, bypass_csp=True)
        for url in sorted(urls):
            found += [f"{role} {v}" for v in audit(page, axe, live_server.url + url, checked)]

    assert len(visited["researcher"]) >= 30 and len(visited["annotator"]) >= 8, visited
    assert {"label", "select-name", "color-contrast", "link-name", "button-name", "region"} <= checked, checked
    assert not found, "\n".join(found)


FOCUS_RING = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return null;
  const s = getComputedStyle(e);
  return {tag: e.tagName, id: e.id, text: (e.innerText || e.value || "").slice(0, 40),
          ring: (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2) || s.boxShadow !== "none"};
}"""


def test_it_shows_where_the_keyboard_focus_is(page_as, live_server, site):
    project, critique = site
    step = f"/trajectories/{critique.trajectory_id}/steps/{critique.step_index}/?critique={critique.pk}"
    unseen: list[str] = []
    pages = (("annotator", "/"), ("annotator", step), ("researcher", "/"), ("researcher", "/jobs/new/critique/"))
    for role, url in pages:
        page = page_as(role)
        page.goto(live_server.url + url)
        stops = 0
        for _ in range(30):
            page.keyboard.press("Tab")
            focused = page.evaluate(FOCUS_RING)
            if focused is None:
                continue
            stops += 1
            if not focused["ring"]:
                unseen.append(f"{role} {url}: {focused}")
        assert stops >= 10, f"{role} {url}: Tab reached only {stops} elements"
    assert not unseen, "focus without a visible ring:\n" + "\n".join(unseen)
