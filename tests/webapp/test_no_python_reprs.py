"""Every page a researcher and an annotator reach by following links shows words and numbers, never a Python
repr: no ``{'`` (a dict), no ``None`` shown as text (issue 21). The crawl starts at the home page with a real
imported run, a finished critique job with outputs and a checkpoint, and follows same-site links."""

from __future__ import annotations

import re
from collections import deque

import pytest

from webapp.jobs.models import Job, StepCritique
from webapp.jobs.services import lifecycle

MAX_PAGES = 120
SKIP = re.compile(r"^/(logout|static|admin|api)|/(export|download|raw)|\.(jsonl?|csv|parquet|zip)$")
TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S)


@pytest.fixture
def finished_job(tau_project, personas):
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    job = lifecycle.check_create_job(personas["researcher"], "critique", {"steps": "first"}, {"trajectory_ids": ids})
    lifecycle.claim(job.pk, "w:1")
    StepCritique.objects.create(trajectory_id=ids[0], step_index=0, job=job, checkpoint=job.checkpoint,
                                prompt_id="critic@test", verdict="optimal", parse_ok=True,
                                record={"predicted_future": "the user is helped", "verdict": "optimal",
                                        "provenance": {"sampling": {"temperature": 0.0, "top_p": None}}})
    lifecycle.do_finish(job.pk, "w:1", Job.SUCCEEDED, outputs={"critiques": 1, "verdicts": {"optimal": 1}})
    return job


def crawl(client, start: str = "/", per_shape: int = 3) -> dict[str, str]:
    """GET pages breadth-first from ``start``: at most ``per_shape`` of each URL shape (ids as N), so the budget
    covers every kind of page rather than every trajectory."""
    seen, pages, todo, shapes = {start}, {}, deque([start]), {}
    while todo and len(pages) < MAX_PAGES:
        url = todo.popleft()
        response = client.get(url)
        if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
            continue
        html = response.content.decode()
        pages[url] = html
        for href in re.findall(r'href="(/[^"#?]*)', html):
            shape = re.sub(r"\d+", "N", href)
            if href not in seen and not SKIP.search(href) and shapes.get(shape, 0) < per_shape:
                seen.add(href)
                shapes[shape] = shapes.get(shape, 0) + 1
                todo.append(href)
    return pages


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
