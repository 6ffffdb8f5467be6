"""A researcher defines a dataset in the browser, watches v1 build, exports it and downloads the file, then
launches critic training from the snapshot.

The build and export jobs run in the test process (the task's body, ``execute``) while the page polls with
htmx; tests/workers runs them on a real worker through Redis.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.conftest import TAU2_GROK, imported, needs_shared
from webapp.jobs.models import Job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_shared]


@pytest.fixture
def no_broker(monkeypatch):
    from webapp.jobs.services import lifecycle

    monkeypatch.setattr(lifecycle, "enqueue", lambda job: None)


def test_it_defines_builds_exports_and_trains_from_a_dataset(page_as, personas, no_broker, tmp_path):
    from tests.webapp.datasets.conftest import add_target
    from webapp.datasets.models import Snapshot
    from webapp.jobs.runners.base import execute

    project = imported("tau2-bench airline", TAU2_GROK)
    for t in project.trajectories.order_by("id")[:4]:
        for index in range(2):
            add_target(t, index)
    page = page_as("researcher")
    base = page.url.rstrip("/")
    page.click("text=Datasets")
    page.click("#new-dataset")
    page.fill("input[name=name]", "browser critic")
    page.select_option("select[name=project]", project.slug)
    page.fill("textarea[name=notes]", "first cut <i>from the browser</i>")
    page.click("#create-dataset")
    expect(page.locator("#snapshot-table")).to_contain_text("building")
    snapshot = Snapshot.objects.get(dataset__name="browser critic")
    page.click(f"#snapshot-{snapshot.pk} a")
    expect(page.locator("#snapshot-status")).to_have_text("building")
    assert execute(snapshot.job_id, "w:1") == Job.SUCCEEDED
    expect(page.locator("#snapshot-status")).to_have_text("ready", timeout=15_000)  # htmx polling
    expect(page.locator("#snapshot-count")).to_have_text("8")
    expect(page.locator("#dataset-card")).to_contain_text("bellman: 8")
    expect(page.locator("#snapshot-notes")).to_have_text("first cut <i>from the browser</i>")  # escaped

    page.select_option("#export-format", "jsonl")
    page.click("#export-button")
    export_job = Job.objects.filter(kind="export-snapshot").get()
    assert execute(export_job.pk, "w:1") == Job.SUCCEEDED
    link = page.locator("#export-table a.download")
    expect(link).to_be_visible(timeout=15_000)
    with page.expect_download() as download:
        link.click()
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert path.name == "browser_critic-v1.jsonl" and len(lines) == 8
    assert lines[0]["messages"][-1]["content"].startswith("FUTURE: bellman future")

    page.fill("#train-form input[name=max_steps]", "2")
    page.click("#train-button")
    expect(page.locator("h1")).to_contain_text("train-critic")
    job = Job.objects.get(kind="train-critic")
    assert job.config["snapshot"] == snapshot.pk and job.config["max_steps"] == 2
    page.goto(f"{base}/snapshots/{snapshot.pk}/")
    expect(page.locator("#snapshot-uses")).to_contain_text(f"job {job.pk}")
    page.screenshot(path=str(tmp_path / "snapshot.png"), full_page=True)
