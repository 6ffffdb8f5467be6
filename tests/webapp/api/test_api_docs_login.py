"""/api/docs and /api/openapi.json list every operation of the service: they need a login (the schema also
answers a valid Bearer token); strangers are sent to the login page, or get 401 JSON like the rest of the API."""

from __future__ import annotations


def test_it_sends_an_anonymous_browser_to_the_login_page(client, db):
    response = client.get("/api/docs")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/api/docs"


def test_it_refuses_the_schema_to_anonymous_and_bogus_tokens(client, db):
    for headers in ({}, {"Authorization": "Bearer nlac_not-a-token"}, {"Authorization": "Basic eDp5"}):
        response = client.get("/api/openapi.json", headers=headers)

        assert response.status_code == 401, headers
        assert "paths" not in response.json()
        assert response.json()["detail"].startswith("log in")


def test_it_serves_docs_and_schema_after_login(client_for):
    client = client_for("annotator")

    docs = client.get("/api/docs")
    schema = client.get("/api/openapi.json")

    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    assert schema.status_code == 200 and "/api/trajectories" in schema.json()["paths"]


def test_it_serves_the_schema_to_a_token_holder(api):
    response = api("researcher").get("/api/openapi.json")

    assert response.status_code == 200
    assert "/api/projects" in response.json()["paths"]


def test_it_refuses_a_revoked_token(client, token_for, personas):
    from webapp.api.models import ApiToken

    token = token_for("researcher")
    ApiToken.objects.update(revoked_at="2020-01-01T00:00:00Z")

    assert client.get("/api/openapi.json", headers={"Authorization": f"Bearer {token}"}).status_code == 401
