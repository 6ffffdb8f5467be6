"""The nlac-iteration parent job: a child per phase, waiting without a worker, woken by each child's end.

The children's own work is replaced by stand-ins (each writes the outputs the next phase reads): what is
tested is the orchestration. tests/workers runs a whole iteration on a real worker with the real model.
"""

from __future__ import annotations

import pytest

from webapp.jobs.kinds import JOB_KINDS
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle
from webapp.trajectories.models import Trajectory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stand_ins(monkeypatch, tau_project, tmp_path):
    """Child runners that do no model work; ``fail`` names a phase kind that raises."""
    behaviour = {"fail": None, "ran": []}
    episodes = list(tau_project.trajectories.order_by("id")[:2])

    def child(kind):
        def run(ctx):
            behaviour["ran"].append(kind)
            if behaviour["fail"] == kind:
                raise RuntimeError(f"{kind} broke")
            if kind == "rollout":
                for t in episodes:
                    Trajectory.objects.filter(pk=t.pk).update(meta={**t.meta, "job": ctx.job.pk})
                return {"trajectories": 2, "success_rate": 0.5, "mean_reward": 0.5,
                        **({"project": tau_project.slug} if behaviour.get("project") else {})}
            if kind == "train-critic":
                assert ctx.config.source == "nlac"
                produced = Checkpoint.objects.create(name=f"nlac-{ctx.job.pk}", path=str(tmp_path / "trained"),
                                                     produced_by=ctx.job, kind="policy+critic")
                return {"checkpoint_produced": produced.pk, "train_loss": 1.5}
            return {"done": kind}
        return run

    for kind in ("rollout", "backup", "critique", "refine", "train-critic"):
        monkeypatch.setattr(*JOB_KINDS[kind].runner_target(), child(kind))
    ema_calls = []

    def fake_ema(ctx, config, online, target, trained):
        ema_calls.append((online.pk, target, trained.pk, config.tau))
        return Checkpoint.objects.create(name=f"{trained.name}-ema", path=str(tmp_path / "ema"), ema_of=trained)

    from webapp.jobs.runners import nlac

    monkeypatch.setattr(nlac, "_ema_twin", fake_ema)
    behaviour["ema"] = ema_calls
    return behaviour


def drive(sent, limit=50):
    """Run what the broker would deliver, in order, until nothing is queued."""
    done = 0
    while sent and done < limit:
        execute(sent.pop(0), "w:1")
        done += 1
    return done


def test_it_runs_the_phases_as_child_jobs_in_order_and_registers_the_ema_twin(personas, stand_ins, sent):
    parent = lifecycle.check_create_job(personas["researcher"], "nlac-iteration", {"env": "twenty_questions",
                                                                                  "tau": 0.1})
    assert parent.queue == "cpu"
    execute(sent.pop(0), "w:1")
    parent.refresh_from_db()
    assert parent.status == Job.WAITING and parent.worker == "" and parent.lease_expires_at is None
    drive(sent)
    parent.refresh_from_db()
    assert parent.status == Job.SUCCEEDED, parent.error
    assert stand_ins["ran"] == ["rollout", "backup", "critique", "refine", "train-critic"]
    children = list(parent.children.order_by("id"))
    assert [c.kind for c in children] == ["rollout", "backup", "critique", "refine", "train-critic"]
    rollout_episodes = children[0].pk
    assert all(c.selection["trajectory_ids"] == list(Trajectory.objects.filter(meta__job=rollout_episodes)
                                                    .order_by("id").values_list("pk", flat=True))
               for c in children[1:])
    assert children[3].config["critique_job"] == children[2].pk  # refine uses this iteration's critiques
    trained = Checkpoint.objects.get(pk=parent.outputs["checkpoint_produced"])
    assert Checkpoint.objects.get(pk=parent.outputs["ema_target"]).ema_of == trained
    assert stand_ins["ema"][0][2:] == (trained.pk, 0.1)
    assert parent.outputs["rollout_success_rate"] == 0.5 and parent.progress_done == parent.progress_total


@pytest.mark.parametrize("env, replayed", [("tool_use", True), ("twenty_questions", False)])
def test_it_backs_up_trajectories_drawn_from_the_replay_buffer_beside_the_fresh_episodes(personas, stand_ins, sent,
                                                                                         tau_project, env, replayed):
    """The rollout's project holds the imported tau-bench run (offline data): a tool-use iteration draws from
    it, a 20 Questions one cannot learn from an airline booking and draws nothing."""
    stand_ins["project"] = True
    parent = lifecycle.check_create_job(personas["researcher"], "nlac-iteration", {
        "env": env, "replay_size": 40, "fresh_fraction": 0.25, "seed": 1})
    drive(sent)
    parent.refresh_from_db()
    assert parent.status == Job.SUCCEEDED, parent.error
    children = list(parent.children.order_by("id"))
    fresh = set(Trajectory.objects.filter(meta__job=children[0].pk).values_list("pk", flat=True))
    drawn = parent.outputs["replayed"]
    assert bool(drawn) == replayed and not fresh & set(drawn)
    if replayed:
        fresh_steps = sum(Trajectory.objects.filter(pk__in=fresh).values_list("n_steps", flat=True))
        steps = sum(Trajectory.objects.filter(pk__in=drawn).values_list("n_steps", flat=True))
        assert steps >= 40 - min(fresh_steps, 10)  # the buffer's share of the 40 transitions, whole trajectories
        assert all(set(drawn) <= set(c.selection["trajectory_ids"]) for c in children[1:])
    assert all(fresh <= set(c.selection["trajectory_ids"]) for c in children[1:])
    again = lifecycle.check_create_job(personas["researcher"], "nlac-iteration", {
        "env": env, "replay_size": 40, "fresh_fraction": 0.25, "seed": 1})
    drive(sent)
    again.refresh_from_db()
    assert again.outputs["replayed"] == drawn or not replayed  # the same seed draws the same transitions


def test_it_fails_with_the_phase_that_failed_and_a_retry_picks_up_from_there(personas, stand_ins, sent):
    stand_ins["fail"] = "critique"
    parent = lifecycle.check_create_job(personas["researcher"], "nlac-iteration", {})
    drive(sent)
    parent.refresh_from_db()
    assert parent.status == Job.FAILED and "phase critique: job" in parent.error and "critique broke" in parent.error
    stand_ins["fail"] = None
    stand_ins["ran"].clear()
    lifecycle.do_retry(parent)
    drive(sent)
    parent.refresh_from_db()
    assert parent.status == Job.SUCCEEDED, parent.error
    assert stand_ins["ran"] == ["critique", "refine", "train-critic"]  # rollout and backup are not redone
    assert parent.children.count() == 5


def test_it_cancels_the_waiting_parent_and_its_running_child(personas, stand_ins, sent):
    parent = lifecycle.check_create_job(personas["researcher"], "nlac-iteration", {})
    execute(sent.pop(0), "w:1")  # the parent starts the rollout child and waits
    child = parent.children.get()
    lifecycle.claim(child.pk, "w:2")
    lifecycle.do_request_cancel(Job.objects.get(pk=parent.pk))
    parent.refresh_from_db()
    child.refresh_from_db()
    assert parent.status == Job.CANCELLED and child.status == Job.RUNNING and child.cancel_requested


def test_it_wakes_a_parent_whose_child_ended_while_nobody_could_wake_it(personas, stand_ins, sent):
    parent = lifecycle.check_create_job(personas["researcher"], "nlac-iteration", {})
    execute(sent.pop(0), "w:1")
    child = parent.children.get()
    sent.clear()  # the child's message is lost ...
    lifecycle.claim(child.pk, "w:2")
    lifecycle.do_finish(child.pk, "w:2", Job.SUCCEEDED, outputs={"trajectories": 0})  # ... and no wake happened
    assert Job.objects.get(pk=parent.pk).status == Job.WAITING
    assert lifecycle.do_reap() == [parent.pk] and sent == [parent.pk]
