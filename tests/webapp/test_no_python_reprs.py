"""Every page a researcher and an annotator reach by following links shows words and numbers, never a Python
repr: no ``{'`` (a dict), no ``None`` shown as text (issue 21). The crawl starts at the home page with a real
imported run, a finished critique job with outputs and a checkpoint, and follows same-site links."""

from __future__ import annotations

import re

import pytest

from tests.webapp.every_page import add_finished_job, crawl
from webapp.jobs.models import StepCritique

TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S)


@pytest.fixture
def finished_job(tau_project, personas):
    return add_finished_job(tau_project, personas["researcher"])


@pytest.mark.parametrize("persona", ["researcher", "annotator"])
def test_it_shows_no_python_repr_on_any_page_it_links_to(client_for, finished_job, persona):
    client = client_for(persona)
    pages = crawl(client)
    critique = StepCritique.objects.get(job=finished_job)
    step_page = f"/trajectories/{critique.trajectory_id}/steps/0/"
    if persona == "researcher":  # the step carrying the critique (its sampling settings) is checked for sure
        pages[step_page] = client.get(step_page).content.decode()
        assert "temperature 0" in pages[step_page] and "top_p –" in pages[step_page]  # jsonb orders keys its way
    assert len(pages) >= (10 if persona == "researcher" else 2), sorted(pages)
    bad = {}
    for url, html in pages.items():
        text = TAG.sub(" ", html)
        found = [m for m in ("{'", "{&#x27;", "[&#x27;") if m in text]
        found += re.findall(r".{0,30}\bNone\b.{0,30}", text)
        if found:
            bad[url] = found[:3]
    assert not bad, bad
