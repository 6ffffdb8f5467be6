"""Data under which every kind of page exists, and a crawl that reaches each kind a persona can follow links to.

Shared by tests/webapp/test_no_python_reprs.py (no Python repr on any page) and
tests/browser/test_accessibility_in_chromium.py (axe-core on every page)."""

from __future__ import annotations

import re
from collections import deque

from webapp.jobs.models import Checkpoint, Job, StepCritique
from webapp.jobs.services import lifecycle

MAX_PAGES = 120
SKIP = re.compile(r"^/(logout|static|admin|api)|/(export|download|raw)|\.(jsonl?|csv|parquet|zip)$")


def add_finished_job(project, researcher) -> Job:
    """A critique job over the project's first two trajectories, succeeded, with one critique (of step 0 of the
    first, verdict optimal) and its checkpoint."""
    ids = list(project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    job = lifecycle.check_create_job(researcher, "critique", {"steps": "first"}, {"trajectory_ids": ids})
    lifecycle.claim(job.pk, "w:1")
    StepCritique.objects.create(trajectory_id=ids[0], step_index=0, job=job, checkpoint=job.checkpoint,
                                prompt_id="critic@test", verdict="optimal", parse_ok=True,
                                record={"predicted_future": "the user is helped", "verdict": "optimal",
                                        "provenance": {"sampling": {"temperature": 0.0, "top_p": None}}})
    lifecycle.do_finish(job.pk, "w:1", Job.SUCCEEDED, outputs={"critiques": 1, "verdicts": {"optimal": 1}})
    return job


def add_every_page(project, personas) -> Job:
    """Beyond the finished job: a checkpoint it produced, a queue over its critiqued step assigned to the annotator,
    the annotator's correction of that step (an annotation with a history, waiting in the reviewer's list), a Bellman
    target and a dataset with a snapshot built from it. Returns the job."""
    from tests.webapp.datasets.conftest import add_target, build, correct, make_dataset
    from webapp.annotation.services.queues import QueueSpec, check_create_queue

    job = add_finished_job(project, personas["researcher"])
    Checkpoint.objects.create(name="every-page critic", path="/m/every-page-critic", kind="critic", produced_by=job,
                              base_model="smollm2")
    critique = StepCritique.objects.get(job=job)
    check_create_queue(personas["researcher"], "optimal steps", project, QueueSpec(verdict="optimal"), 1,
                       [personas["annotator"]])
    correct(personas["annotator"], critique.trajectory, critique.step_index, critique)
    add_target(critique.trajectory, critique.step_index)
    build(make_dataset(project))
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
