"""The supervised-rollout and replay-critic jobs, run in this process with a scripted actor, user and critic.

The critic stops ``create_task`` calls (update_task_1 asks for a status change): the supervised arm succeeds
where the baseline fails, the intervened step's counterfactual (the create_task runs) fails, and a forced
intervention on the approved closing reply makes the actor create the task: that forced intervention is the
only harmful one (harmfulness 0 for the critic's own interventions, 1/1 for the forced one).
"""

from __future__ import annotations

import pytest

from nlac_core.actions import parse_tool_action
from nlac_core.backends.fake import FakeBackend
from tests.conftest import needs_shared
from tests.nlac_core.test_counterfactual import user_reply
from tests.nlac_core.test_supervision import FEEDBACK, UPDATE, actor_reply, critic
from webapp.jobs import loaded_model
from webapp.jobs.models import Checkpoint, Job, StepCritique
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.django_db(transaction=True), needs_shared]


def actor_and_user(request) -> str:
    """The job's model plays the actor and (as in every rollout job) the simulated user."""
    if "You play a user" in str(request.messages[0]["content"]):
        return user_reply(request)
    return actor_reply(request)


@pytest.fixture
def models(tmp_path):
    critic_row = Checkpoint.objects.create(name="scripted critic", path=str(tmp_path / "critic"), kind="critic")
    built = {"actor": FakeBackend(model="scripted-actor", responder=actor_and_user), "critic": critic()}
    loaded_model.override(lambda config, checkpoint: built["critic" if checkpoint and checkpoint.pk == critic_row.pk
                                                            else "actor"])
    yield critic_row, built
    loaded_model.override(None)


def supervised_job(user, critic_row, **config):
    return lifecycle.check_create_job(user, "supervised-rollout", {
        "env": "tool_use", "split": "all", "tasks": 4, "trials": 1, "max_turns": 6, "temperature": 0.0,
        "critic_checkpoint": critic_row.pk, "project": "supervised test", "forced_sample": 1, **config})


def test_it_runs_both_arms_stores_the_checks_and_measures_the_critic(personas, models):
    critic_row, _ = models
    job = supervised_job(personas["researcher"], critic_row)  # the first 4 tasks: 3 create_task ones, update_task_1
    assert execute(job.pk, "w:1") == Job.SUCCEEDED
    job.refresh_from_db()
    stored = Trajectory.objects.filter(meta__job=job.pk)
    by_arm = {arm: stored.filter(meta__arm=arm) for arm in ("baseline", "supervised", "counterfactual")}
    assert by_arm["baseline"].count() == by_arm["supervised"].count() == 4
    update = by_arm["supervised"].get(task__external_id="update_task_1")
    assert update.success and not by_arm["baseline"].get(task__external_id="update_task_1").success
    assert update.meta["supervision"]["interventions"] == 2
    # the decided checks are runtime critiques of their steps, one per round, about the proposal of that round
    rows = list(StepCritique.objects.filter(job=job, trajectory=update).order_by("step_index", "round"))
    assert [(r.step_index, r.round, r.verdict) for r in rows] == [(1, 0, "suboptimal"), (1, 1, "suboptimal"),
                                                                  (2, 0, "optimal")]
    assert rows[0].mode == "runtime" and rows[0].checkpoint == critic_row
    assert rows[0].record["action"].startswith('TOOL_CALL: {"name": "create_task"')
    assert rows[0].record["suggestion"] == FEEDBACK and rows[0].record["executed"] is False
    out = job.outputs
    assert out["episodes"]["supervised"] == 4 and out["critic_checkpoint"] == critic_row.pk
    assert out["interventions"]["interventions"] == sum(t.meta["supervision"]["interventions"]
                                                       for t in by_arm["supervised"])
    assert out["arms"]["pairs"] == 4 and out["arms"]["recovery"] is not None
    assert out["supervised"]["success_rate"] > out["baseline"]["success_rate"]
    cf = out["counterfactual"]
    assert cf["forced"] == 1 and cf["without"] == by_arm["counterfactual"].count() - 1
    without = by_arm["counterfactual"].get(meta__counterfactual__of=update.content_hash,
                                           meta__counterfactual__kind="without")
    assert not without.success and cf["helpfulness"] is not None
    # apart: the critic's own interventions helped; only the forced one, on a step it approved, broke a success
    own, forced = cf["by_kind"]["intervened"], cf["by_kind"]["forced"]
    assert (own["n"], forced["n"]) == (cf["without"], cf["forced"]) == (4, 1)
    assert own["harmfulness"] == 0.0 and forced["harmfulness"] == 1.0 and cf["harmfulness"] == 0.5
    assert own["would_fail"] == cf["would_fail"] and own["helpfulness"] == cf["helpfulness"]


def test_it_resumes_without_playing_a_stored_episode_twice(personas, models):
    critic_row, built = models
    job = supervised_job(personas["researcher"], critic_row, tasks=2, counterfactuals=False)
    assert execute(job.pk, "w:1") == Job.SUCCEEDED
    calls = len(built["actor"].calls)
    Job.objects.filter(pk=job.pk).update(status=Job.QUEUED, worker="")
    assert execute(job.pk, "w:2") == Job.SUCCEEDED
    assert len(built["actor"].calls) == calls
    assert Trajectory.objects.filter(meta__job=job.pk).count() == 4


def test_it_refuses_bad_supervision_settings(personas):
    from webapp.jobs.configs import ConfigError

    for config, field in (({"where": "sometimes"}, "where"), ({"max_rounds": -1}, "max_rounds"),
                          ({"critic_backend": "openai"}, "critic_backend"), ({"both_arms": "yes"}, "both_arms"),
                          ({"critic_checkpoint": 987654}, "critic_checkpoint")):
        with pytest.raises(ConfigError) as caught:
            lifecycle.check_create_job(personas["researcher"], "supervised-rollout", config)
        assert caught.value.field == field
    assert not Job.objects.exists()


def test_it_replays_the_critic_on_an_imported_tau_bench_run(tau_project, personas, models):
    from nlac_core.actions import render_message_action
    from nlac_core.supervision import is_state_changing
    from webapp.trajectories.convert import message_record
    from webapp.trajectories.models import Message

    critic_row, _ = models
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:3])
    steps = Message.objects.filter(trajectory_id__in=ids, step_index__isnull=False)
    for where, expected in (("all", steps.count()), ("state_changing", sum(
            is_state_changing(render_message_action(message_record(m))) for m in steps))):
        job = lifecycle.check_create_job(personas["researcher"], "replay-critic",
                                         {"checkpoint": critic_row.pk, "where": where, "chunk_size": 16},
                                         {"trajectory_ids": ids})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED
        job.refresh_from_db()
        rows = StepCritique.objects.filter(job=job)
        assert rows.count() == job.outputs["judged"] == expected and 0 < expected <= job.outputs["steps"]
        assert {r.mode for r in rows} == {"runtime"}
        # the scripted critic stops create_task calls only; tau-bench airline has none: every action is approved
        assert job.outputs["interventions"] == 0 and {r.verdict for r in rows} == {"optimal"}
        first = rows.order_by("trajectory_id", "step_index").first()
        assert first.record["action"] and first.record["decision"] == "approve"
        assert job.outputs["failed"]["judged"] + job.outputs["succeeded"]["judged"] == expected


WRONG = 'TOOL_CALL: {"name": "update_task_status", "arguments": {"task_id": "task_1", "status": "pending"}}'


def self_player(request) -> str:
    """Sets task_1 back to pending (a wrong call) unless told otherwise; after feedback it does the right one."""
    if "You play a user" in str(request.messages[0]["content"]):
        return user_reply(request)
    if any(str(m["content"]).startswith("A reviewer checked") for m in request.messages if m["role"] == "user"):
        return UPDATE
    if any('"status": "completed"' in str(m["content"]) for m in request.messages):
        return "Done: task_1 is completed."
    return WRONG


def critic_data_job(user, **config):
    return lifecycle.check_create_job(user, "critic-data", {
        "split": "all", "tasks": 4, "k": 2, "max_turns": 3, "project": "critic data test", "train": False,
        **config})


def test_it_builds_runtime_critic_targets_from_hard_tasks_and_a_snapshot(personas, sent):
    loaded_model.override(lambda config, checkpoint: FakeBackend(model="self-player", responder=self_player))
    try:
        job = critic_data_job(personas["researcher"], train=True, approve_ratio=1.0)
        assert execute(job.pk, "w:1") == Job.SUCCEEDED
    finally:
        loaded_model.override(None)
    job.refresh_from_db()
    out = job.outputs
    assert out["episodes"] == 8 and out["tasks"]["hard"] == out["tasks"]["unsolved"] == 4  # nothing solved
    labels = StepCritique.objects.filter(job=job, mode="runtime-label")
    update = labels.filter(trajectory__task__external_id="update_task_1")
    stops = update.filter(verdict="suboptimal")
    assert stops.count() == 2 and {c.step_index for c in stops} == {1}  # the wrong call, after the greeting
    assert "expected update_task_status" in stops.first().record["suggestion"]
    # the judged action as it ran (PostgreSQL's jsonb keeps an object's keys in its own order: compare the call)
    assert parse_tool_action(stops.first().record["action"]) == parse_tool_action(WRONG)
    assert out["targets"]["stored"] == labels.count() == out["targets"]["intervene"] + out["targets"]["approve"]
    # the failed episodes gold actions cannot place go to annotators: every agent step, not the scripted greeting
    from webapp.annotation.models import Queue
    from webapp.trajectories.models import Message

    queue = Queue.objects.get(pk=out["queue"])
    queued = set(queue.items.values_list("trajectory_id", "step_index"))
    placed = set(labels.values_list("trajectory_id", flat=True))
    failed = {t for t, _ in queued}
    assert out["unlocalised_episodes"] == len(failed) == 2 and not failed & placed
    agent_steps = {(m.trajectory_id, m.step_index) for m in Message.objects.filter(
        trajectory_id__in=failed, step_index__isnull=False) if not m.meta.get("scripted")}
    assert queue.n_items == len(queued) == len(agent_steps) > 0 and queued == agent_steps
    from webapp.datasets.models import Snapshot

    snapshot = Snapshot.objects.get(pk=out["snapshot"])
    assert snapshot.status == Snapshot.READY and snapshot.dataset.kind == "runtime_critic"
    assert snapshot.n_records == labels.count() and {r.source for r in snapshot.records.all()} == {"label"}
    completion = snapshot.records.filter(trajectory__task__external_id="update_task_1").first().data["completion"]
    assert completion[0]["content"].startswith("DECISION: intervene\nFEEDBACK: This action does not do")
    train = Job.objects.get(pk=out["train_job"])
    assert train.kind == "train-critic" and train.config["snapshot"] == snapshot.pk and train.parent_id == job.pk
    assert train.pk in sent


def chatty_player(request) -> str:
    """An actor that never calls a tool (as SmolLM2-135M on this env) and a user who never gives up: every
    episode runs to the turn cap."""
    if "You play a user" in str(request.messages[0]["content"]):
        return "Please mark task_1 as completed."
    return "Let me look into that for you."


def test_it_places_errors_at_the_turn_cap_when_asked(personas):
    loaded_model.override(lambda config, checkpoint: FakeBackend(model="chatty", responder=chatty_player))
    try:
        plain, capped = (critic_data_job(personas["researcher"], at_turn_cap=flag, project=f"cap {flag}")
                         for flag in (False, True))
        assert execute(plain.pk, "w:1") == execute(capped.pk, "w:1") == Job.SUCCEEDED
    finally:
        loaded_model.override(None)
    plain.refresh_from_db()
    capped.refresh_from_db()
    assert plain.outputs["targets"]["intervene"] == 0 and "snapshot" not in plain.outputs  # nothing placed
    cut = StepCritique.objects.filter(job=capped, mode="runtime-label", verdict="suboptimal")
    placed = capped.outputs["targets"]["intervene"]
    assert placed > 0 and cut.count() == placed
    assert all(c.record["reasoning"].startswith("ran out of turns without") for c in cut)
    last = {t.pk: t.n_steps - 1 for t in Trajectory.objects.filter(meta__job=capped.pk)}
    assert all(c.step_index == last[c.trajectory_id] for c in cut)  # the step that had the last turn
    assert capped.outputs["unlocalised_episodes"] == plain.outputs["unlocalised_episodes"] - placed


def test_it_keeps_only_the_targets_whose_feedback_leads_to_a_success(personas):
    def stubborn(request):  # ignores feedback: the re-run fails too
        text = self_player(request)
        return WRONG if text == UPDATE else text

    for responder, kept in ((self_player, 2), (stubborn, 0)):
        loaded_model.override(lambda config, checkpoint, r=responder: FakeBackend(model="self-player", responder=r))
        try:
            job = critic_data_job(personas["researcher"], split="all", tasks=4, validate_feedback=True,
                                  project=f"validated {kept}")
            assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).traceback
        finally:
            loaded_model.override(None)
        job.refresh_from_db()
        update = StepCritique.objects.filter(job=job, mode="runtime-label", verdict="suboptimal",
                                             trajectory__task__external_id="update_task_1")
        assert update.count() == kept
        assert job.outputs["validation"]["checked"] >= 2
        assert Trajectory.objects.filter(meta__job=job.pk, meta__arm="validation").count() == \
            job.outputs["validation"]["checked"]


def test_it_launches_the_pipeline_and_a_replay_from_their_forms(client_for, tau_project, sent):
    client = client_for("researcher")
    response = client.post("/jobs/new/critic-data/", {
        "backend": "hf", "batch_size": 8, "split": "synthetic_train", "tasks": 6, "k": 3, "max_turns": 8,
        "temperature": 0.8, "seed": 1, "approve_ratio": 0.5, "validate_feedback": "on", "train_max_steps": 10,
        "learning_rate": 1e-4, "at_turn_cap": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(kind="critic-data")
    assert (job.config["k"], job.config["approve_ratio"], job.config["validate_feedback"], job.config["train"]) == (
        3, 0.5, True, False)  # an unticked box is false
    assert job.config["at_turn_cap"] is True
    assert job.config["critic_checkpoint"] is None and job.config["train_max_steps"] == 10
    bad = client.post("/jobs/new/critic-data/", {"backend": "hf", "batch_size": 8, "split": "x", "tasks": 2, "k": 3,
                                                  "temperature": 0, "seed": 0, "approve_ratio": 1,
                                                  "learning_rate": 1e-4})
    assert bad.status_code == 400 and "k self-play trials of a task need sampling" in bad.content.decode()
    first = tau_project.trajectories.order_by("id").first().pk
    page = client.get(f"/trajectories/{first}/").content.decode()
    assert f'href="/jobs/new/replay-critic/?trajectory={first}" id="launch-replay-critic"' in page
    form = client.get(f"/jobs/new/replay-critic/?trajectory={first}").content.decode()
    assert "New replay-critic job" in form and f'value="{first}"' in form  # the selection comes pre-filled
    listing = client.get(f"/projects/{tau_project.slug}/?outcome=failure").content.decode()
    assert 'id="launch-replay-critic" href="/jobs/new/replay-critic/?project=' in listing
    response = client.post("/jobs/new/replay-critic/", {
        "trajectory_ids": str(first), "backend": "hf", "batch_size": 8, "steps": "all", "max_steps": 50,
        "where": "state_changing", "feedback_tokens": 32, "chunk_size": 8})
    assert response.status_code == 302
    replay = Job.objects.get(kind="replay-critic")
    assert replay.selection["trajectory_ids"] == [first] and replay.config["where"] == "state_changing"
    assert len(sent) == 2
