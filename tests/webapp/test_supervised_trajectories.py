"""Supervised trajectories: the runtime critic's checks shown at each step, the run's summary, counterfactual
re-runs linked both ways, and the list filters on interventions and arm (read from Trajectory.meta only)."""

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from nlac_core.records import Message, TaskRecord, ToolCall, TrajectoryRecord
from webapp.trajectories import queries
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.imports import do_store_records
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script>"
CRITIC = "critic-smol-135m"
PROMPT = "runtime_critic@1a2b3c"
TASK = TaskRecord(external_id="t1", instruction="Create a task for the user.")


def action(name: str, **arguments) -> str:
    return "TOOL_CALL: " + json.dumps({"name": name, "arguments": arguments})


def check(round_no: int, proposal: str, decision: str, feedback: str = "", **extra) -> dict:
    base = {"round": round_no, "proposal": proposal, "decision": decision, "feedback": feedback}
    if decision != "unchecked":
        base |= {"critic_prompt_id": PROMPT, "critic_model": CRITIC}
    return base | extra


def summary(interventions: int, checks: int) -> dict:
    return {"critic_model": CRITIC, "critic_backend": "hf", "critic_prompt_id": PROMPT, "max_rounds": 2,
            "max_interventions": 4, "where": "all", "interventions": interventions, "checks": checks}


def episode(trial: int, *, reward: float, meta: dict, step_meta: tuple[dict, dict, dict] = ({}, {}, {}),
            source_model: str = "actor-x") -> TrajectoryRecord:
    """user asks; step 0 calls create_task; tool answers; step 1 replies; user thanks; step 2 says goodbye."""
    messages = (
        Message(role="user", content=f"Please create a task (trial {trial})."),
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="create_task", arguments={"title": "Pay rent"}),),
                meta=step_meta[0]),
        Message(role="tool", content='{"task_id": "task_9"}', tool_call_id="c1"),
        Message(role="assistant", content="Created task_9.", meta=step_meta[1]),
        Message(role="user", content="Thanks!"),
        Message(role="assistant", content="Goodbye.", meta=step_meta[2]),
    )
    return TrajectoryRecord(task=TASK, messages=messages, trial=trial, source_model=source_model, reward=reward,
                            meta=meta)


REJECTED = action("delete_all_tasks", note=HOSTILE)
RAN = action("create_task", title="Pay rent")


def supervised_steps() -> tuple[dict, dict, dict]:
    return (
        {"supervision": [check(0, REJECTED, "intervene", "Do not <b>delete</b> everything; create the task."),
                         check(1, RAN, "approve", executed=True)]},
        {"supervision": [check(0, "Created task_9.", "approve", executed=True)]},
        {"supervision": [check(0, "Goodbye.", "unchecked", reason="the episode's interventions are used up",
                               executed=True)]},
    )


@pytest.fixture
def run(db):
    """One project: a supervised episode with an intervention (success) and its counterfactual re-run without
    it (failure), a supervised one with two interventions (failure), one without any, a baseline, and one whose
    meta is junk from a file."""
    project = do_get_or_create_project("supervised airline")
    intervened = episode(0, reward=1.0, meta={"arm": "supervised", "job": 7, "supervision": summary(1, 3)},
                         step_meta=supervised_steps())
    removed = {"supervision": [check(0, REJECTED, "removed", "Do not <b>delete</b> everything; create the task.",
                                     executed=True,
                                     reason="counterfactual: the intervention removed, the original proposal runs")]}
    records = {
        "intervened": intervened,
        "counterfactual": episode(1, reward=0.0, step_meta=(removed, {}, {}), meta={
            "arm": "counterfactual", "supervision": summary(0, 2),
            "counterfactual": {"of": intervened.content_hash(), "step_index": 0, "kind": "without"}}),
        "twice": episode(2, reward=0.0, meta={"arm": "supervised", "supervision": summary(2, 5)}),
        "clean": episode(3, reward=1.0, meta={"arm": "supervised", "supervision": summary(0, 3)}),
        "baseline": episode(4, reward=1.0, meta={"arm": "baseline"}),
        "junk": episode(5, reward=0.0, meta={"arm": 5, "supervision": "yes", "counterfactual": [1]},
                        step_meta=({"supervision": "lots"}, {"supervision": [3, {"decision": 1}]}, {})),
    }
    do_store_records(project, list(records.values()), "supervised run")
    by_hash = {t.content_hash: t for t in Trajectory.objects.filter(project=project)}
    project.refresh_from_db()
    return project, {name: by_hash[r.content_hash()] for name, r in records.items()}


def body_of(client, t: Trajectory) -> str:
    response = client.get(f"/trajectories/{t.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_it_strikes_through_the_rejected_proposal_escaped_with_the_critics_feedback(client_for, run):
    _, t = run
    body = body_of(client_for("reviewer"), t["intervened"])
    assert HOSTILE not in body and "<b>delete</b>" not in body
    dels = re.findall(r'<del class="rejected-proposal">(.*?)</del>', body, re.S)
    assert len(dels) == 1
    assert "<code>delete_all_tasks</code>" in dels[0]  # the tool call shown readably, not as one line of JSON
    assert "&quot;note&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in dels[0]
    assert "create_task" not in dels[0]
    assert "critic: intervene" in body and CRITIC in body
    assert "Do not &lt;b&gt;delete&lt;/b&gt; everything; create the task." in body
    assert "ran after 1 intervention<" in body  # the revision that ran is the normal message
    assert re.search(r'class="msg assistant step revised".*?<code>create_task</code>', body, re.S)


def test_it_marks_approved_and_unchecked_steps(client_for, run):
    _, t = run
    body = body_of(client_for("reviewer"), t["intervened"])
    assert body.count("critic: approved") == 2  # the revision at step 0, and step 1
    assert "critic: unchecked — the episode&#x27;s interventions are used up" in body
    assert 'class="critic-note muted small"' in body


def test_it_summarises_the_supervision_in_a_header_box(client_for, run):
    _, t = run
    body = body_of(client_for("researcher"), t["intervened"])
    box = body[body.index('id="supervision-summary"'):body.index('id="conversation"')]
    assert "arm: supervised" in box and CRITIC in box and "(hf)" in box and PROMPT in box
    assert "all actions" in box
    assert "Limits R / I</dt><dd" in box and ">2 / 4</dd>" in box
    assert '<dd id="supervision-totals">1 / 3</dd>' in box
    assert 'href="/jobs/7/">job 7</a>' in box
    assert "supervision-summary" not in body_of(client_for("researcher"), Trajectory.objects.create(
        project=t["baseline"].project, task=t["baseline"].task, content_hash="x" * 64))


def test_it_links_a_counterfactual_and_its_original_both_ways(client_for, run):
    _, t = run
    client = client_for("reviewer")
    original, rerun = t["intervened"], t["counterfactual"]
    body = body_of(client, original)
    link = re.search(r'class="counterfactual-branch"[^>]*>.*?without this intervention: '
                     rf'<a href="/trajectories/{rerun.pk}/">failure \(reward 0.00\)</a>', body, re.S)
    assert link
    assert body.index('id="step-0"') < link.start() < body.index('id="step-1"')  # shown at its step
    assert body.count('class="counterfactual-branch"') == 1
    back = body_of(client, rerun)
    assert "arm: counterfactual" in back
    assert re.search(rf'Counterfactual re-run of\s*<a href="/trajectories/{original.pk}/#step-0">trajectory '
                     rf'{original.pk}</a> from step 0:\s*the intervention removed: the original proposal ran. '
                     r'The original: success \(reward 1.00\).', back)
    assert ("counterfactual: the intervention removed, the original proposal runs (the critic had said: "
            "Do not &lt;b&gt;delete&lt;/b&gt; everything; create the task.)") in back
    assert HOSTILE not in back


def test_it_shows_junk_supervision_meta_without_failing(client_for, run):
    _, t = run
    body = body_of(client_for("reviewer"), t["junk"])
    assert "critic:" not in body and "<del" not in body


def ids(response) -> set[int]:
    return {row["id"] for row in response.context["page"].rows}


def test_it_filters_the_list_to_trajectories_with_interventions(client_for, run):
    project, t = run
    client = client_for("reviewer")
    base = f"/projects/{project.slug}/"
    assert ids(client.get(base)) == {x.pk for x in t.values()}
    with_interventions = client.get(base + "?interventions=1")
    assert ids(with_interventions) == {t["intervened"].pk, t["twice"].pk}
    assert with_interventions.context["page"].count == 2
    assert ids(client.get("/trajectories/?interventions=1")) == {t["intervened"].pk, t["twice"].pk}
    assert ids(client.get(base + "?interventions=0")) == {x.pk for x in t.values()}
    assert ids(client.get(base + "?interventions=1&outcome=success")) == {t["intervened"].pk}
    assert ids(client.get(base + "?interventions=1&outcome=failure")) == {t["twice"].pk}
    assert ids(client.get(base + "?interventions=1&arm=counterfactual")) == set()
    assert ids(client.get(base + "?arm=supervised")) == {t["intervened"].pk, t["twice"].pk, t["clean"].pk}
    assert ids(client.get(base + "?arm=baseline")) == {t["baseline"].pk}
    assert ids(client.get(base + "?arm=counterfactual&outcome=failure")) == {t["counterfactual"].pk}
    assert b"were not understood" in client.get(base + "?interventions=maybe&arm=nope").content


def test_it_pages_through_the_intervention_filter(client_for, run, monkeypatch):
    project, t = run
    monkeypatch.setattr(queries, "PAGE_SIZE", 1)
    client = client_for("reviewer")
    base = f"/projects/{project.slug}/"
    url, seen = base + "?interventions=1&sort=reward_asc", []
    while url:
        response = client.get(url)
        seen += [row["id"] for row in response.context["page"].rows]
        url = base + response.context["next_url"] if response.context["next_url"] else None
        assert url is None or "interventions=1" in url
    assert seen == [t["twice"].pk, t["intervened"].pk]


def test_it_shows_the_filters_and_intervention_badges_in_list_rows(client_for, run):
    project, t = run
    body = client_for("reviewer").get(f"/projects/{project.slug}/?interventions=1").content.decode()
    assert '<input type="checkbox" name="interventions" value="1" checked>' in body
    assert '<option value="counterfactual">counterfactual</option>' in body
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r'<tr class="[^"]*">\s*<td><a href="/trajectories/'
                                                             r'(\d+)/">.*?</tr>', body, re.S)}
    assert "2 interventions</span>" in rows[t["twice"].pk] and "1 intervention</span>" in rows[t["intervened"].pk]
    full = client_for("reviewer").get(f"/projects/{project.slug}/").content.decode()
    assert "0 interventions</span>" in full and '<span class="badge arm">baseline</span>' in full


def test_it_lists_supervised_trajectories_without_reading_messages(client_for, run, django_assert_max_num_queries):
    project, _ = run
    client = client_for("reviewer")
    client.get(f"/projects/{project.slug}/")  # warm the session and the content types
    with django_assert_max_num_queries(8), CaptureQueriesContext(connection) as captured:
        response = client.get(f"/projects/{project.slug}/?interventions=1&arm=supervised&outcome=failure")
    assert response.status_code == 200 and response.context["page"].count == 1
    assert not [q["sql"] for q in captured.captured_queries if "trajectories_message" in q["sql"]]
