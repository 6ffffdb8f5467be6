"""API writes without a live token answer 401 like the reads (never a CSRF 403); a browser session's write
still needs its CSRF token."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from webapp.api.api import api
from webapp.api.models import ApiToken

WRITE_METHODS = ("post", "put", "patch", "delete")


def _write_routes() -> list[tuple[str, str]]:
    """Every write operation the API publishes, with each path parameter set to 1."""
    paths = api.get_openapi_schema()["paths"]
    routes = [(method, re.sub(r"\{[^}]+\}", "1", path)) for path, operations in paths.items()
              for method in operations if method in WRITE_METHODS]
    assert routes, "the API publishes no write operation"
    return routes


@pytest.fixture
def revoked(token_for):
    raw = token_for("researcher")
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    return raw


@pytest.mark.django_db
@pytest.mark.parametrize("credential", ["none", "bogus", "revoked"])
def test_it_answers_401_to_every_write_without_a_live_token(personas, revoked, credential):
    headers = {"none": {}, "bogus": {"Authorization": "Bearer nlac_not-a-real-token"},
               "revoked": {"Authorization": f"Bearer {revoked}"}}[credential]
    client = Client(enforce_csrf_checks=True)
    read = client.get("/api/projects", headers=headers)
    assert read.status_code == 401
    for method, url in _write_routes():
        response = getattr(client, method)(url, data={}, content_type="application/json", headers=headers)
        assert response.status_code == 401, (method, url, response.content)
        assert response.json() == read.json(), (method, url)
    assert set(read.json()) == {"detail", "field"} and read["WWW-Authenticate"] == "Bearer"


def _csrf_token(client: Client) -> str:
    client.get("/account/tokens/")  # any page with a form sets the CSRF cookie
    return client.cookies["csrftoken"].value


@pytest.mark.django_db
def test_it_still_checks_csrf_on_a_session_write(personas):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas["researcher"])
    payload = {"name": "from the browser", "kind": "trajectories", "project": "no-such-project"}
    refused = client.post("/api/datasets", payload, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    accepted = client.post("/api/datasets", payload, content_type="application/json",
                           headers={"X-CSRFToken": _csrf_token(client)})
    assert accepted.status_code == 400 and accepted.json()["field"] == "project"  # past auth and CSRF
    assert client.get("/api/projects").status_code == 200  # session reads need no CSRF token


@pytest.mark.django_db
def test_it_needs_no_csrf_token_with_a_live_bearer_token(personas, token_for):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/api/datasets", {"name": "x", "kind": "trajectories", "project": "no-such-project"},
                           content_type="application/json",
                           headers={"Authorization": f"Bearer {token_for('researcher')}"})
    assert response.status_code == 400 and response.json()["field"] == "project"
