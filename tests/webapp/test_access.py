"""Roles are enforced on the server."""

import pytest
from django.test import Client

from tests.conftest import needs_shared

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/", "/trajectories/", "/import/", "/trajectories/1/"])
def test_it_sends_anonymous_visitors_to_the_login_page(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=")


def test_it_shows_nothing_to_a_user_without_a_role(client_for):
    client = client_for("outsider")
    assert client.get("/").status_code == 403
    assert client.get("/trajectories/").status_code == 403


@needs_shared
def test_it_shows_an_annotator_nothing_outside_their_queues_and_no_import(client_for, tau_project):
    client = client_for("annotator")  # in no queue: the README's "only the steps of their queues"
    assert client.get("/").status_code == 200
    assert client.get(f"/projects/{tau_project.slug}/").status_code == 404
    t = tau_project.trajectories.first()
    assert client.get(f"/trajectories/{t.pk}/").status_code == 404
    refused = client.get("/import/")
    assert refused.status_code == 403 and "for researchers" in refused.content.decode()
    assert client.post("/import/", {"project": "x"}).status_code == 403
    assert b'href="/import/"' not in client.get("/").content


def test_it_lets_researchers_import(client_for):
    assert client_for("researcher").get("/import/").status_code == 200


def test_it_logs_in_with_a_password_and_returns_to_the_page_asked_for(personas):
    client = Client()
    response = client.post("/login/?next=/trajectories/", {"username": "annotator", "password": "annotator-pw-123",
                                                            "next": "/trajectories/"})
    assert response.status_code == 302 and response["Location"] == "/trajectories/"
    assert client.get("/trajectories/").status_code == 200


def test_it_refuses_a_post_without_a_csrf_token(personas):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas["researcher"])
    assert client.post("/import/", {"project": "p"}).status_code == 403
