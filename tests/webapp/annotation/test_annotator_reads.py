"""What each role reads. Reviewers, researchers and admins read every project, trajectory and step; an
annotator reads only the steps of their queues, the trajectories those steps belong to and the projects
holding them (404 for anything else), on the pages and through the API."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver

from tests.webapp.annotation.conftest import fields
from webapp.accounts.services import do_create_user
from webapp.annotation.services import queues, revisions
from webapp.annotation.services.queues import QueueSpec
from webapp.annotation.services.revisions import Target
from webapp.api.api import api
from webapp.jobs.models import Checkpoint, Job

# Pages an annotator in no queue may open: lists, which must then hold nothing of the projects.
LIST_PAGES = {"", "trajectories/", "queues/", "account/tokens/"}
API_LISTS = {"/api/projects", "/api/trajectories"}


@pytest.fixture
def world(personas, project, trajectory, critiques):
    """A queue over step 1 of ``trajectory`` for the annotator, their correction of it, a stranger (an
    annotator in no queue), and one object of every other kind a URL names."""
    queue = queues.check_create_queue(personas["researcher"], "verdicts", project, QueueSpec(verdict="suboptimal"),
                                      1, [personas["annotator"]])
    item = queue.items.get()
    assert (item.trajectory_id, item.step_index) == (trajectory.pk, 1)
    revision = revisions.check_save_revision(personas["annotator"], Target(trajectory, 1, critiques[1]), fields(),
                                             None, queue_item=item)
    other = project.trajectories.exclude(pk=trajectory.pk).filter(n_steps__gte=1).order_by("id").first()
    stranger = do_create_user("stranger", "pw-stranger-1", "annotator")[0]
    job = Job.objects.create(kind="critique", status=Job.SUCCEEDED, config={})
    checkpoint = Checkpoint.objects.create(name="critic-1", path="/m/critic-1")
    return {"queue": queue, "revision": revision, "other": other, "stranger": stranger, "job": job,
            "checkpoint": checkpoint, "trajectory": trajectory, "project": project}


def _routes(patterns=None, prefix: str = ""):
    """Every URL pattern of the site as a route string (``trajectories/<int:pk>/``), but the admin's and
    the API's (walked from its schema below)."""
    for p in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            if route not in ("admin/", "api/"):
                yield from _routes(p.url_patterns, route)
        elif isinstance(p, URLPattern) and route not in ("login/", "logout/"):
            yield route


def _url(route: str, w: dict) -> str:
    """The route with each parameter set to a real object of its kind (a new parameter fails the test, so
    that every page stays in the walk)."""
    ids = {"trajectories": w["trajectory"].pk, "steps": 1, "annotations": w["revision"].annotation_id,
           "revisions": w["revision"].pk, "queues": w["queue"].pk, "projects": w["project"].slug,
           "jobs": w["job"].pk, "new": "critique", "checkpoints": w["checkpoint"].pk,
           # researcher-only objects: the role is refused before any lookup, so any id will do
           "datasets": 1, "snapshots": 1, "exports": 1, "tokens": 1}

    def fill(match: re.Match) -> str:
        before = route[:match.start()].rstrip("/").rsplit("/", 1)[-1]
        assert before in ids, f"{route}: no object for the parameter after {before!r}; add one to the walk"
        return str(ids[before])

    return "/" + re.sub(r"<[^>]+>", fill, route)


def test_it_walks_every_page_and_refuses_an_annotator_in_no_queue(client, world):
    client.force_login(world["stranger"])
    routes = list(_routes())
    assert "trajectories/<int:pk>/steps/<int:step_index>/" in routes and "projects/<slug:slug>/" in routes
    for route in routes:
        url = _url(route, world)
        response = client.get(url)
        if route in LIST_PAGES:
            body = response.content.decode()
            assert response.status_code == 200, url
            assert world["project"].slug not in body and f'/trajectories/{world["trajectory"].pk}/' not in body, url
        else:
            assert response.status_code in (403, 404, 405), (url, response.status_code)
    t = world["trajectory"]
    for page in (f"/trajectories/{t.pk}/", f'/projects/{world["project"].slug}/', f"/trajectories/{t.pk}/steps/1/",
                 f'/annotations/{world["revision"].annotation_id}/'):
        assert client.get(page).status_code in (403, 404), page  # never 200 for what is not theirs
    assert client.get(f"/trajectories/{t.pk}/steps/1/", HTTP_HX_REQUEST="true").status_code == 404
    listed = client.get("/trajectories/", {"q": "reservation"}).content.decode()
    assert "0 trajectories" in listed


def _api_gets(w: dict) -> list[str]:
    ids = {"pk": w["trajectory"].pk, "step_index": 1}
    paths = api.get_openapi_schema()["paths"]
    return [re.sub(r"\{(\w+)\}", lambda m: str(ids.get(m[1], 1)), path) for path, ops in paths.items() if "get" in ops]


def test_it_answers_404_through_the_api_to_an_annotator_in_no_queue(client, world):
    from webapp.api.tokens import do_create_token

    headers = {"Authorization": f"Bearer {do_create_token(world['stranger'], 't')[1]}"}
    urls = _api_gets(world)
    assert f'/api/trajectories/{world["trajectory"].pk}/steps/1' in urls
    for url in urls:
        response = client.get(url, headers=headers)
        if url in API_LISTS:
            assert response.status_code == 200, url
            assert world["project"].slug not in response.content.decode(), url
        else:
            assert response.status_code in (403, 404), (url, response.status_code)
    assert client.get("/api/trajectories", headers=headers).json()["count"] == 0
    filtered = client.get(f'/api/trajectories?project={world["project"].slug}', headers=headers)
    assert filtered.status_code == 400 and filtered.json()["field"] == "project"  # as for a project that is not


@pytest.mark.parametrize("who", ["annotator", "reviewer", "researcher", "admin"])
def test_it_gives_each_role_its_reads_on_pages_and_api(client, personas, world, who):
    from webapp.api.tokens import do_create_token

    t, other, project = world["trajectory"], world["other"], world["project"]
    everything = who != "annotator"
    client.force_login(personas[who])
    headers = {"Authorization": f"Bearer {do_create_token(personas[who], 't')[1]}"}
    mine = {f"/trajectories/{t.pk}/": 200, f"/trajectories/{t.pk}/steps/1/": 200, f"/projects/{project.slug}/": 200,
            f"/annotations/{world['revision'].annotation_id}/": 200,
            f"/api/trajectories/{t.pk}": 200, f"/api/trajectories/{t.pk}/steps/1": 200}
    not_mine = {f"/trajectories/{other.pk}/": 404, f"/trajectories/{t.pk}/steps/0/": 404,
                f"/trajectories/{other.pk}/steps/0/": 404, f"/api/trajectories/{other.pk}": 404,
                f"/api/trajectories/{t.pk}/steps/0": 404, f"/api/trajectories/{other.pk}/steps/0": 404}
    for url, status in {**mine, **not_mine}.items():
        expected = 200 if everything else status
        got = client.get(url, headers=headers if url.startswith("/api/") else {}).status_code
        assert got == expected, (who, url, got)
    listed = client.get("/api/trajectories", headers=headers).json()
    assert listed["count"] == (project.n_trajectories if everything else 1)
    assert [row["id"] for row in listed["items"]] == ([t.pk] if not everything else [r["id"] for r in listed["items"]])
    page = client.get(f"/projects/{project.slug}/").content.decode()
    assert (f'href="/trajectories/{other.pk}/"' in page) == everything
    assert [p["slug"] for p in client.get("/api/projects", headers=headers).json()] == [project.slug]
    step_page = client.get(f"/trajectories/{t.pk}/").content.decode()
    assert (f'href="/trajectories/{t.pk}/steps/0/"' in step_page) == everything  # no link to a 404
    # whole-project figures and filter choices are for those who read the whole project
    assert ('id="project-summary"' in page and "Mean reward" in page) == everything
    assert ("Mean reward" in client.get("/").content.decode()) == everything
    listed_project = client.get("/api/projects", headers=headers).json()[0]
    assert listed_project["n_trajectories"] == (project.n_trajectories if everything else 1)
    assert (listed_project["mean_reward"] is None) == (not everything or project.mean_reward is None)
    other_reasons = {other.termination_reason} - {t.termination_reason}
    choices = client.get("/trajectories/").content.decode()
    assert all((f'value="{r}"' in choices) == everything for r in other_reasons if r)
    assert f'href="/trajectories/{t.pk}/steps/1/"' in step_page


def test_it_keeps_the_list_one_query_for_an_annotator(client, personas, world):
    def list_queries(who: str) -> list[str]:
        client.force_login(personas[who])
        client.get("/trajectories/")  # warm the session
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/trajectories/").status_code == 200
        return [q["sql"] for q in captured.captured_queries]

    researcher, annotator = list_queries("researcher"), list_queries("annotator")
    assert len(annotator) == len(researcher)  # the queue rule adds a clause, not a query
    rows = [sql for sql in annotator if '"trajectories_trajectory"."preview"' in sql]  # the page of rows
    assert len(rows) == 1 and "EXISTS" in rows[0]
