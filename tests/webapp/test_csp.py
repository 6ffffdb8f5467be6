"""Content-Security-Policy: every page carries a policy that allows scripts and styles only from our origin, and
the pages need nothing else (no inline <script>, no on*= handler, no hx-on, no style=""). The browser side (no
violation reported by a real chromium) is tests/browser/test_csp_in_chromium.py."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from webapp.jobs.forms import FORMS

INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I), "an inline <script>"),
    (re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.I), "an on*= handler"),
    (re.compile(r"<[a-z][^>]*\shx-on[:-]", re.I), "an hx-on attribute (htmx evaluates it)"),
    (re.compile(r"<[a-z][^>]*\sstyle\s*=", re.I), "a style= attribute"),
    (re.compile(r"<style\b", re.I), "a <style> element"),
]


def pages(tau_project):
    trajectory = tau_project.trajectories.order_by("pk").first()
    step = trajectory.messages.exclude(step_index=None).order_by("step_index").first().step_index
    common = [reverse("home"), reverse("trajectory_list"), reverse("queue_list"), reverse("token_list")]
    reading = [reverse("trajectory_detail", args=[trajectory.pk]), reverse("annotate_step", args=[trajectory.pk, step]),
               reverse("project_detail", args=[tau_project.slug])]  # annotators read only their queues' steps
    researcher = [reverse("import_upload"), reverse("job_list"), reverse("dataset_list"), reverse("dataset_new"),
                  reverse("checkpoint_list"), reverse("checkpoint_compare"), reverse("queue_new"),
                  *[reverse("job_launch", args=[kind]) for kind in FORMS]]
    return {"annotator": common, "reviewer": [*common, *reading, reverse("review_list")],
            "researcher": [*common, *reading, *researcher],
            "admin": [*common, *reading, *researcher, "/admin/", "/api/docs"]}


def test_it_sends_a_strict_policy(client):
    policy = client.get(reverse("login"))["Content-Security-Policy"]

    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["form-action"] == "'self'"
    assert directives["base-uri"] == "'self'"
    assert "unsafe" not in policy


@pytest.mark.parametrize("role", ["annotator", "reviewer", "researcher", "admin"])
def test_it_serves_pages_that_need_no_inline_code(client_for, tau_project, role):
    client = client_for(role)
    if role == "admin":
        client.get("/").wsgi_request.user.__class__.objects.filter(username="admin").update(is_staff=True)
    for url in pages(tau_project)[role]:
        response = client.get(url)
        assert response.status_code == 200, url
        assert "Content-Security-Policy" in response, url
        html = response.content.decode()
        for pattern, what in INLINE:
            found = pattern.search(html)
            assert found is None, f"{url} has {what}: {found and found.group(0)[:120]}"


def test_it_tells_htmx_not_to_inject_styles_or_eval(client_for):
    html = client_for("annotator").get(reverse("home")).content.decode()

    assert '"includeIndicatorStyles": false' in html and '"allowEval": false' in html
