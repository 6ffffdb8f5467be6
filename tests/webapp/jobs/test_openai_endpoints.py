"""A worker's API key goes only to an endpoint the admin configured, never to a URL a researcher typed.

The endpoint is a small HTTP server on 127.0.0.1 in this process that records
every request's headers and answers like a chat completions endpoint: a job or
a config naming anything but a configured endpoint is refused with the field
named and the listener receives nothing; a configured endpoint gets the key of
its own variable, and only that.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webapp.jobs.configs import ConfigError
from webapp.jobs.models import Job
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle

WORKER_KEY = "sk-worker-secret-must-not-leave"
LAB_KEY = "sk-lab-key-for-the-lab-endpoint"
OPENAI_KINDS = ("critique", "rollout", "refine", "evaluate", "supervised-rollout", "critic-data", "evaluate-critic")


class Listener:
    """Records (path, headers) of each request; answers every chat completion with "The answer is 4"."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server hook's name
                listener.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.dumps({"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                                   "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                       "role": "assistant", "content": "The answer is \\boxed{4}."}}],
                                   "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener(settings, monkeypatch):
    """The listener, configured as endpoint "lab" (key in LAB_KEY) and "local" (no key); the worker also holds
    an OPENAI_API_KEY that must never reach it."""
    server = Listener()
    monkeypatch.setenv("OPENAI_API_KEY", WORKER_KEY)
    monkeypatch.setenv("LAB_KEY", LAB_KEY)
    settings.NLAC_OPENAI_ENDPOINTS = f"lab {server.url} LAB_KEY, local {server.url}"
    yield server
    server.close()


def sent_keys(listener: Listener) -> list[str]:
    return [headers.get("authorization", "") for _, headers in listener.requests]


def test_it_refuses_a_url_typed_into_the_launch_form_and_sends_nothing(client_for, listener):
    response = client_for("researcher").post("/jobs/new/rollout/", {
        "backend": "openai", "endpoint_model": "gpt-x", "endpoint": listener.url, "base_url": listener.url,
        "env": "math", "tasks": 1, "trials": 1, "temperature": 0, "seed": 0, "batch_size": 1})
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "endpoint" in errors and listener.url in " ".join(errors["endpoint"])
    assert not Job.objects.exists() and listener.requests == []


def test_it_offers_only_the_configured_endpoints_in_the_form(client_for, listener):
    page = client_for("researcher").get("/jobs/new/rollout/").content.decode()
    assert '<option value="lab">lab</option>' in page and '<option value="local">local</option>' in page
    assert listener.url not in page  # the addresses (and key variables) are the admin's business


@pytest.mark.parametrize("kind", OPENAI_KINDS)
def test_it_refuses_a_job_config_naming_a_url_or_an_unknown_endpoint(kind, personas, listener, tau_project):
    selection = {"trajectory_ids": [tau_project.trajectories.first().pk]}
    base = {"backend": "openai", "endpoint_model": "gpt-x"}
    with pytest.raises(ConfigError) as raised:
        lifecycle.check_create_job(personas["researcher"], kind, {**base, "base_url": listener.url}, selection)
    assert raised.value.field == "base_url" and "configured: lab, local" in raised.value.message
    with pytest.raises(ConfigError) as raised:
        lifecycle.check_create_job(personas["researcher"], kind, {**base, "endpoint": listener.url}, selection)
    assert raised.value.field == "endpoint" and "is not a configured endpoint" in raised.value.message
    assert not Job.objects.exists() and listener.requests == []


def test_it_refuses_a_url_sent_through_the_api_naming_the_field(client, personas, listener):
    from webapp.api.tokens import do_create_token

    token = do_create_token(personas["researcher"], "tests")[1]
    response = client.post("/api/jobs", {"kind": "rollout", "config": {
        "backend": "openai", "endpoint_model": "gpt-x", "base_url": listener.url, "env": "math", "tasks": 1}},
        content_type="application/json", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 400 and response.json()["field"] == "base_url"
    assert not Job.objects.exists() and listener.requests == []


@pytest.mark.django_db(transaction=True)
def test_it_never_calls_the_url_stored_in_an_old_job_row(personas, listener):
    job = Job.objects.create(kind="rollout", queue="gpu", created_by=personas["researcher"], config={
        "backend": "openai", "endpoint_model": "gpt-x", "base_url": listener.url, "checkpoint": None,
        "batch_size": 1, "env": "math", "tasks": 1, "trials": 1, "temperature": 0.0, "seed": 0})
    assert execute(job.pk, "w:1") == Job.FAILED
    job.refresh_from_db()
    assert "base_url" in job.error and "never a URL" in job.error
    assert listener.requests == []


@pytest.mark.django_db(transaction=True)
def test_it_fails_a_job_whose_endpoint_the_admin_removed_without_calling_anything(personas, listener, settings):
    job = lifecycle.check_create_job(personas["researcher"], "rollout", {
        "backend": "openai", "endpoint_model": "gpt-x", "endpoint": "lab", "env": "math", "tasks": 1})
    settings.NLAC_OPENAI_ENDPOINTS = ""
    assert execute(job.pk, "w:1") == Job.FAILED
    assert "endpoint" in Job.objects.get(pk=job.pk).error and listener.requests == []


@pytest.mark.django_db(transaction=True)
def test_it_sends_a_configured_endpoint_the_key_of_its_own_variable_only(personas, listener):
    for endpoint, key in (("lab", LAB_KEY), ("local", "EMPTY")):
        listener.requests.clear()
        job = lifecycle.check_create_job(personas["researcher"], "rollout", {
            "backend": "openai", "endpoint_model": "gpt-x", "endpoint": endpoint, "env": "math", "tasks": 1,
            "trials": 1, "max_turns": 1, "max_new_tokens": 16, "temperature": 0.0, "project": f"via {endpoint}"})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
        assert listener.requests and {path for path, _ in listener.requests} == {"/v1/chat/completions"}
        assert set(sent_keys(listener)) == {f"Bearer {key}"}
        assert not any(WORKER_KEY in value for _, headers in listener.requests for value in headers.values())


@pytest.mark.django_db(transaction=True)
def test_it_fails_a_job_whose_endpoint_key_is_not_set_on_the_worker(personas, listener, monkeypatch):
    job = lifecycle.check_create_job(personas["researcher"], "rollout", {
        "backend": "openai", "endpoint_model": "gpt-x", "endpoint": "lab", "env": "math", "tasks": 1})
    monkeypatch.delenv("LAB_KEY")
    assert execute(job.pk, "w:1") == Job.FAILED
    assert "LAB_KEY is not set on this worker" in Job.objects.get(pk=job.pk).error and listener.requests == []


@pytest.mark.parametrize("value, message", [
    ("lab", "entry 1 ('lab'): expected NAME BASE_URL [KEY_VARIABLE]"),
    ("a http://x/v1, lab ftp://10.0.0.5/v1 KEY", "entry 2: expected an http(s) base URL, got 'ftp://10.0.0.5/v1'"),
    ("lab https://user:sk-123@api.example.org/v1", "entry 1: put the key in a variable, not in the URL"),
    ("lab http://x/v1 sk-not-a-variable", "entry 1: 'sk-not-a-variable' is not an environment variable name"),
    ("lab http://x/v1, lab http://y/v1", "entry 2: the name 'lab' is used twice"),
])
def test_it_refuses_a_malformed_endpoint_list_naming_the_entry(value, message, settings):
    from django.core.exceptions import ImproperlyConfigured

    from webapp.jobs.apps import check_openai_endpoints
    from webapp.jobs.endpoints import parse

    with pytest.raises(ImproperlyConfigured) as raised:
        parse(value)
    assert str(raised.value) == f"NLAC_OPENAI_ENDPOINTS, {message}"
    settings.NLAC_OPENAI_ENDPOINTS = value
    assert [e.id for e in check_openai_endpoints()] == ["jobs.E001"]  # `manage.py check` reports it at start
