"""Trajectory text is untrusted: shown as text everywhere, never as markup."""

import json

import pytest

from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = pytest.mark.django_db

XSS = "<script>alert('pwned')</script>"
IMG = '<img src=x onerror="alert(1)">'


@pytest.fixture
def hostile(tmp_path):
    record = {
        "messages": [
            {"role": "system", "content": f"policy {XSS}"},
            {"role": "user", "content": f"hello {IMG} <b>bold</b>"},
            {"role": "assistant", "content": f"reply {XSS}", "tool_calls": [
                {"id": "c1\"><script>x</script>", "type": "function",
                 "function": {"name": f"tool{XSS}", "arguments": json.dumps({"q": XSS, IMG: 1})}}]},
            {"role": "tool", "tool_call_id": "c1\"><script>x</script>", "name": f"tool{XSS}", "content": f"out {IMG}"},
        ],
        "reward": 0,
        "metadata": {"task_id": f"task{XSS}", "model": f"model{IMG}", "instruction": f"do {XSS}"},
    }
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(record) + "\n")
    project = do_get_or_create_project(f"hostile {XSS}")
    assert do_import_file(path, project).ok
    return Trajectory.objects.get(project=project)


def assert_escaped(body: str):
    assert "<script>alert" not in body and "<script>x</script>" not in body
    assert "<img src=x" not in body and "<b>bold</b>" not in body
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in body


def test_it_escapes_content_tool_arguments_and_tool_names_on_the_detail_page(client_for, hostile):
    body = client_for("reviewer").get(f"/trajectories/{hostile.pk}/").content.decode()
    assert_escaped(body)
    assert "tool&lt;script&gt;" in body  # the tool name, as text
    assert "&lt;img src=x onerror=" in body  # an argument key, as text


def test_it_escapes_the_list_the_home_page_and_the_project_page(client_for, hostile):
    client = client_for("reviewer")
    for url in ("/", "/trajectories/", f"/projects/{hostile.project.slug}/", "/trajectories/?q=%3Cscript%3E"):
        body = client.get(url).content.decode()
        assert "<script>alert" not in body and "<img src=x" not in body, url
