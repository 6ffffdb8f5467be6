"""API clients: a Django test client that sends a persona's bearer token."""

from __future__ import annotations

import pytest

from tests.webapp.datasets.conftest import gold_set, project, sent  # noqa: F401 - shared fixtures


@pytest.fixture
def token_for(personas):
    from webapp.api.tokens import do_create_token

    def make(name: str) -> str:
        return do_create_token(personas[name], "tests")[1]
    return make


@pytest.fixture
def api(client, token_for):
    """api("researcher").get("/api/...") sends the researcher's token (no session)."""
    class As:
        def __init__(self, token: str):
            self.headers = {"Authorization": f"Bearer {token}"}

        def get(self, url, **kw):
            return client.get(url, headers=self.headers, **kw)

        def post(self, url, data=None, **kw):
            if data is not None and "content_type" not in kw and not kw.get("multipart"):
                kw["content_type"] = "application/json"
            kw.pop("multipart", None)
            return client.post(url, data, headers=self.headers, **kw)

    return lambda name: As(token_for(name))
