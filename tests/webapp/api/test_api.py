"""The REST API over HTTP with bearer tokens: authentication, the UI's permissions for every role, the
resources, and clear 4xx errors."""

from __future__ import annotations

import pytest

from tests.conftest import TAU2_GROK
from webapp.api.models import ApiToken
from webapp.jobs.models import Job

ROLES = ("annotator", "reviewer", "researcher", "admin", "outsider")


def test_it_answers_401_without_a_live_token_and_serves_its_schema_and_docs_after_login(client, personas, token_for):
    assert client.get("/api/openapi.json").status_code == 401  # the schema and docs need a login
    assert client.get("/api/docs").status_code == 302
    client.force_login(personas["outsider"])
    assert client.get("/api/openapi.json").status_code == 200
    docs = client.get("/api/docs")
    client.logout()
    assert docs.status_code == 200 and b"/static/ninja/swagger-ui-bundle.js" in docs.content
    assert b"cdn." not in docs.content  # nothing is fetched from the internet
    assert client.get("/api/projects").status_code == 401
    assert client.get("/api/projects", headers={"Authorization": "Bearer nlac_nope"}).status_code == 401
    raw = token_for("researcher")
    assert client.get("/api/projects", headers={"Authorization": f"Bearer {raw}"}).status_code == 200
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    assert client.get("/api/projects", headers={"Authorization": f"Bearer {raw}"}).status_code == 401


def test_it_makes_and_revokes_tokens_from_the_account_page(client_for, client):
    page = client_for("annotator").post("/account/tokens/", {"name": "<laptop>"})
    secret = page.context["secret"]
    assert secret.startswith("nlac_") and secret.encode() in page.content and b"&lt;laptop&gt;" in page.content
    token = ApiToken.objects.get()
    assert token.key_hash != secret and secret not in token.key_hash  # only the hash is stored
    assert client.get("/api/projects", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    assert client.get("/account/tokens/").content.count(secret.encode()) == 0  # shown once
    client.post(f"/account/tokens/{token.pk}/revoke/")
    client.logout()
    assert client.get("/api/projects", headers={"Authorization": f"Bearer {secret}"}).status_code == 401


@pytest.mark.parametrize("who", ROLES)
def test_it_applies_the_ui_permissions_to_every_role(project, gold_set, api, who):
    from tests.webapp.datasets.conftest import build, make_dataset

    snapshot = build(make_dataset(project))
    t = gold_set[0]
    reads = {"browse": [f"/api/trajectories?project={project.slug}", f"/api/trajectories/{t.pk}",
                        f"/api/trajectories/{t.pk}/steps/0", "/api/projects"],
             "research": ["/api/datasets", f"/api/datasets/{snapshot.dataset_id}", f"/api/snapshots/{snapshot.pk}",
                          f"/api/snapshots?dataset={snapshot.dataset_id}&status=ready",
                          f"/api/snapshots/{snapshot.pk}/records", "/api/jobs", "/api/checkpoints",
                          "/api/evaluations"]}
    client = api(who)
    browse = who != "outsider"
    research = who in ("researcher", "admin")
    # an annotator in no queue reads no trajectory (the project filter names a project that is not, for them)
    annotator = {reads["browse"][0]: 400, reads["browse"][1]: 404, reads["browse"][2]: 404, "/api/projects": 200}
    for url in reads["browse"]:
        expected = annotator[url] if who == "annotator" else 200 if browse else 403
        assert client.get(url).status_code == expected, url
    for url in reads["research"]:
        assert client.get(url).status_code == (200 if research else 403), url
    created = client.post("/api/datasets", {"name": f"by {who}", "kind": "trajectories", "project": project.slug})
    assert created.status_code == (201 if research else 403)
    job = client.post("/api/jobs", {"kind": "export", "selection": {"trajectory_ids": [t.pk]}})
    assert job.status_code == (201 if research else 403)
    assert client.post(f"/api/snapshots/{snapshot.pk}/exports", {"format": "jsonl"}).status_code == (
        202 if research else 403)


def test_it_lists_trajectories_in_pages_and_shows_steps_with_their_critiques(project, gold_set, api):
    client = api("reviewer")
    first = client.get(f"/api/trajectories?project={project.slug}&sort=oldest").json()
    assert first["count"] == project.n_trajectories == 20 and len(first["items"]) == 20
    failed = client.get(f"/api/trajectories?project={project.slug}&outcome=failure").json()
    assert failed["items"] and all(not row["success"] for row in failed["items"])
    t = gold_set[0]
    detail = client.get(f"/api/trajectories/{t.pk}").json()
    assert detail["content_hash"] == t.content_hash and len(detail["messages"]) == t.n_messages
    step = client.get(f"/api/trajectories/{t.pk}/steps/0").json()
    assert step["action"]["role"] == "assistant" and step["critiques"][0]["predicted_future"] == "model future 0"
    missing = client.get(f"/api/trajectories/{t.pk}/steps/999")
    assert missing.status_code == 404 and "has no agent step 999" in missing.json()["detail"]
    assert client.get("/api/trajectories/0").status_code == 422  # ids start at 1
    assert client.get("/api/trajectories?outcome=sometimes").status_code == 422
    assert client.get("/api/trajectories?project=no-such-project").status_code == 400


def test_it_imports_a_file_and_refuses_a_bad_one_naming_the_place(db, personas, api, tmp_path):
    from webapp.trajectories.models import Project

    if not TAU2_GROK.is_file():
        pytest.skip("../shared/data is not beside this checkout")
    client = api("researcher")
    with TAU2_GROK.open("rb") as f:
        ok = client.post("/api/imports", {"file": f, "project": "api import"}, multipart=True)
    assert ok.status_code == 200, ok.content
    assert ok.json()["added"] == 20 and Project.objects.get(slug=ok.json()["project"]).n_trajectories == 20
    bad = tmp_path / "broken.json"
    bad.write_text('[{"task_id": 1, "reward": "lots", "info": {}, "traj": []}]')
    with bad.open("rb") as f:
        refused = client.post("/api/imports", {"file": f, "project": "api import 2"}, multipart=True)
    assert refused.status_code == 400 and "broken.json" in refused.json()["detail"]
    assert not Project.objects.filter(name="api import 2", n_trajectories__gt=0).exists()
    with bad.open("rb") as f:
        assert api("annotator").post("/api/imports", {"file": f, "project": "x"}, multipart=True).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_it_builds_exports_and_downloads_a_snapshot_and_launches_jobs(project, gold_set, api, personas):
    from webapp.jobs.runners.base import execute

    client = api("researcher")
    made = client.post("/api/datasets", {"name": "api critic", "kind": "critic_targets", "project": project.slug,
                                         "spec": {"filter": {"outcome": "any"}}})
    assert made.status_code == 201, made.content
    snapshot = made.json()["snapshots"][0]
    assert snapshot["status"] == "building" and snapshot["version"] == 1
    assert execute(snapshot["job"], "w:1") == Job.SUCCEEDED
    snapshot = client.get(f"/api/snapshots/{snapshot['id']}").json()
    assert snapshot["status"] == "ready" and snapshot["n_records"] == 24
    page = client.get(f"/api/snapshots/{snapshot['id']}/records?limit=10").json()
    rest = client.get(f"/api/snapshots/{snapshot['id']}/records?after={page['next_after']}&limit=500").json()
    assert len(page["items"]) == 10 and len(rest["items"]) == 14 and rest["next_after"] is None
    export = client.post(f"/api/snapshots/{snapshot['id']}/exports", {"format": "jsonl", "split": "train"}).json()
    assert export["status"] == "queued" and export["download"] is None
    assert client.get(f"/api/exports/{export['id']}/download").status_code == 404
    assert execute(export["job"], "w:1") == Job.SUCCEEDED
    export = client.get(f"/api/exports/{export['id']}").json()
    body = b"".join(client.get(export["download"]).streaming_content)
    assert body.count(b"\n") == export["n_records"] == snapshot["card"]["splits"]["train"]
    second = client.post(f"/api/datasets/{made.json()['id']}/build", {"notes": "again"})
    assert second.status_code == 202 and second.json()["version"] == 2
    versions = client.get(f"/api/snapshots?dataset={made.json()['id']}").json()
    assert [v["version"] for v in versions] == [2, 1]
    assert [v["version"] for v in client.get("/api/snapshots?status=ready").json()] == [1]

    train = client.post("/api/jobs", {"kind": "train-critic", "config": {"snapshot": snapshot["id"], "max_steps": 1}})
    assert train.status_code == 201 and train.json()["queue"] == "gpu"
    assert client.get(f"/api/jobs/{train.json()['id']}").json()["config"]["snapshot"] == snapshot["id"]
    assert client.get("/api/jobs?kind=train-critic").json()[0]["id"] == train.json()["id"]


def test_it_gives_clear_4xx_errors_for_bad_requests(project, api):
    client = api("researcher")
    bad = client.post("/api/jobs", {"kind": "critique", "config": {"k": 99}, "selection": {"trajectory_ids": [1]}})
    assert bad.status_code == 400 and bad.json()["field"] == "k" and "between 1 and 16" in bad.json()["detail"]
    internal = client.post("/api/jobs", {"kind": "build-snapshot", "config": {"snapshot": 1}})
    assert internal.status_code == 400 and "POST /api/datasets/{id}/build" in internal.json()["detail"]
    unknown = client.post("/api/jobs", {"kind": "teleport"})
    assert unknown.status_code == 400 and "unknown job kind 'teleport'" in unknown.json()["detail"]
    dataset = client.post("/api/datasets", {"name": "x", "kind": "critic_targets", "project": "nope"})
    assert dataset.status_code == 400 and dataset.json()["field"] == "project"
    spec = client.post("/api/datasets", {"name": "x", "kind": "critic_targets", "project": project.slug,
                                         "spec": {"filter": {"outcome": "maybe"}}})
    assert spec.status_code == 400 and spec.json()["field"] == "filter.outcome"
    assert client.post("/api/datasets", "{not json", content_type="application/json").status_code in (400, 422)
    assert client.get(f"/api/snapshots/{2**63 - 1}").status_code == 404
    assert client.get(f"/api/snapshots/{2**63}").status_code == 422
    assert client.get("/api/jobs?limit=100000").status_code == 422
