"""The trajectory page: a readable chat with structured tool calls and the task beside it."""

import json

import pytest

from tests.conftest import needs_shared
from webapp.trajectories.models import Trajectory

pytestmark = [needs_shared, pytest.mark.django_db]


def test_it_shows_tool_calls_with_pretty_json_and_links_results_to_calls(client_for, tau_project):
    t = Trajectory.objects.filter(project=tau_project).order_by("id").first()
    body = client_for("reviewer").get(f"/trajectories/{t.pk}/").content.decode()
    call = t.messages.exclude(tool_calls=[]).order_by("position").first()
    tc = call.tool_calls[0]
    result = t.messages.filter(role="tool", tool_call_id=tc["id"], position__gt=call.position).order_by("position")[0]
    assert f'id="call-{tc["id"]}-m{call.position}"' in body
    assert f'href="#m{result.position}">result' in body and f'href="#m{call.position}">↑ call' in body
    assert "{\n  &quot;user_id&quot;: &quot;mia_li_3668&quot;\n}" in body  # indented JSON, escaped
    assert "<summary>System / policy" in body  # the long policy is collapsed
    assert 'class="flash"' not in body  # the conversation is not mistaken for flash messages


def test_it_lists_every_agent_step_in_the_step_index(client_for, tau_project):
    t = Trajectory.objects.filter(project=tau_project).order_by("-n_messages").first()
    assert t.n_messages >= 60
    response = client_for("reviewer").get(f"/trajectories/{t.pk}/")
    body = response.content.decode()
    assert body.count("data-step-link=") == t.n_steps
    assert body.count('class="msg assistant step"') == t.n_steps


def test_it_shows_the_task_gold_actions_and_reward_breakdown(client_for, tau_project):
    t = Trajectory.objects.filter(project=tau_project).order_by("id").first()
    body = client_for("reviewer").get(f"/trajectories/{t.pk}/").content.decode()
    assert "You are mia_li_3668" in body
    assert "book_reservation" in body and "Gold actions" in body
    assert "<th>r_actions</th><td>0.0</td>" in body


def test_it_marks_user_side_tool_calls_and_shows_the_tau2_policy(client_for, tmp_path):
    from tests.conftest import TAU2_GROK
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    data = json.loads(TAU2_GROK.read_text())
    sim = data["simulations"][0]
    sim["messages"][1:1] = [
        {"role": "user", "content": "checking my phone", "turn_idx": 1, "tool_calls": [
            {"id": "u1", "name": "check_status_bar", "arguments": {}, "requestor": "user"}]},
        {"role": "tool", "id": "u1", "content": "4G, full bars", "requestor": "user", "turn_idx": 1},
    ]
    data["simulations"] = [sim]
    path = tmp_path / "tau2_user_tools.json"
    path.write_text(json.dumps(data))
    project = do_get_or_create_project("tau2 telecom-like")
    assert do_import_file(path, project).ok
    t = Trajectory.objects.get(project=project)
    body = client_for("reviewer").get(f"/trajectories/{t.pk}/").content.decode()
    assert "user-side tool call" in body and "check_status_bar" in body
    assert "Policy (" in body and "# Airline Agent Policy" in body


def test_it_shows_a_harness_error(client_for, tmp_path):
    from tests.conftest import TAU_ERROR
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    project = do_get_or_create_project("errors")
    do_import_file(TAU_ERROR, project)
    t = Trajectory.objects.get(project=project)
    body = client_for("reviewer").get(f"/trajectories/{t.pk}/").content.decode()
    assert "harness error" in body and "EOFError: EOF when reading a line" in body


def test_it_answers_404_for_a_missing_trajectory(client_for):
    assert client_for("reviewer").get("/trajectories/999999/").status_code == 404


def test_it_looks_for_counterfactual_re_runs_only_in_a_project_that_holds_some(tau_project, django_assert_num_queries):
    from webapp.trajectories.supervision import branches_of

    t = Trajectory.objects.select_related("project").filter(project=tau_project).first()
    assert tau_project.facets["has_counterfactuals"] is False  # the import's summary says so
    with django_assert_num_queries(0):  # no read of a JSON key of every row of the project
        assert branches_of(t) == {}
    re_run = Trajectory.objects.filter(project=tau_project).exclude(pk=t.pk).first()
    re_run.meta = {"counterfactual": {"of": t.content_hash, "step_index": 2, "kind": "corrected"}}
    re_run.save(update_fields=["meta"])
    from webapp.trajectories.services.projects import do_refresh_summary
    do_refresh_summary(tau_project)
    t = Trajectory.objects.select_related("project").get(pk=t.pk)
    assert [b.pk for b in branches_of(t)[2]] == [re_run.pk]
