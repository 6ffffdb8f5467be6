"""Runners called in this process (the task's body), with a scripted model: results, resume, cancel, failure.

Transactional: the lease heartbeat runs on a thread of its own, with its own connection.
"""

from __future__ import annotations

import pytest

from webapp.jobs.models import Job, StepCritique
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle
from webapp.trajectories.models import Trajectory

pytestmark = pytest.mark.django_db(transaction=True)


def critique_job(project, user, n=3, **config):
    ids = list(project.trajectories.order_by("id").values_list("id", flat=True)[:n])
    return lifecycle.check_create_job(user, "critique", {"steps": "first", "chunk_size": 1, **config},
                                      {"trajectory_ids": ids})


def test_it_writes_one_critique_per_selected_step_linked_to_the_job(tau_project, personas, fake_model):
    job = critique_job(tau_project, personas["researcher"])
    assert execute(job.pk, "w:1") == Job.SUCCEEDED
    job.refresh_from_db()
    rows = list(StepCritique.objects.filter(job=job).order_by("trajectory_id"))
    assert [(r.trajectory_id, r.step_index) for r in rows] == [(t, 0) for t in job.selection["trajectory_ids"]]
    assert all(r.parse_ok and r.verdict == "optimal" and r.prompt_id.startswith("evaluator_zero_shot@")
               for r in rows)
    assert rows[0].record["predicted_future"] == "After this action, the user confirms"
    assert job.checkpoint.name == "smollm2-135m-instruct" and {r.checkpoint_id for r in rows} == {job.checkpoint_id}
    assert job.outputs["critiques"] == 3 and job.outputs["verdicts"] == {"optimal": 3}
    assert (job.progress_done, job.progress_total) == (3, 3) and job.rate is not None and job.rate > 0
    assert job.finished_at is not None and job.lease_expires_at is None
    assert "critiqued 3/3 steps" in job.log_tail


def test_it_finishes_a_half_done_job_without_writing_a_step_twice(tau_project, personas, fake_model):
    """Two chunks committed, then the worker dies in the third; the retry writes only the two missing steps."""
    from nlac_core.backends.fake import FakeBackend
    from webapp.jobs import loaded_model

    job = critique_job(tau_project, personas["researcher"], n=4)
    generations = {"n": 0}

    def dies_in_chunk_3(request):
        generations["n"] += 1
        if generations["n"] == 7:  # a chunk of one step makes 3 generate calls
            raise RuntimeError("worker died")
        return " fine"

    loaded_model.override(lambda config, checkpoint: FakeBackend(responder=dies_in_chunk_3))
    assert execute(job.pk, "w:1") == Job.FAILED
    assert StepCritique.objects.filter(job=job).count() == 2
    lifecycle.do_retry(job)
    second = FakeBackend(responder=lambda r: " fine")
    loaded_model.override(lambda config, checkpoint: second)
    assert execute(job.pk, "w:2") == Job.SUCCEEDED
    rows = StepCritique.objects.filter(job=job)
    assert rows.count() == 4 and len({(r.trajectory_id, r.step_index) for r in rows}) == 4
    assert sum(1 for kind, _ in second.calls if kind == "generate") == 2 * 3  # only the two missing steps
    job.refresh_from_db()
    assert job.attempts == 2 and job.outputs["critiques"] == 4


def test_it_stops_between_chunks_when_cancelled_and_keeps_what_it_finished(tau_project, personas, fake_model):
    job = critique_job(tau_project, personas["researcher"], n=3)

    def cancel_after_first_chunk(config, checkpoint):
        from nlac_core.backends.fake import FakeBackend

        calls = {"n": 0}

        def respond(request):
            calls["n"] += 1
            if calls["n"] == 3:  # the first chunk's third generation: ask to stop
                Job.objects.filter(pk=job.pk).update(cancel_requested=True)
            return " fine"
        return FakeBackend(responder=respond)

    from webapp.jobs import loaded_model

    loaded_model.override(cancel_after_first_chunk)
    assert execute(job.pk, "w:1") == Job.CANCELLED
    job.refresh_from_db()
    assert job.status == Job.CANCELLED and StepCritique.objects.filter(job=job).count() == 1
    assert "stopping between chunks (cancelled)" in job.log_tail


def test_it_records_the_error_and_traceback_of_a_failing_job(tau_project, personas):
    from webapp.jobs import loaded_model

    def broken(config, checkpoint):
        raise RuntimeError("CUDA out of memory (simulated)")

    loaded_model.override(broken)
    try:
        job = critique_job(tau_project, personas["researcher"], n=1)
        assert execute(job.pk, "w:1") == Job.FAILED
    finally:
        loaded_model.override(None)
    job.refresh_from_db()
    assert job.error == "RuntimeError: CUDA out of memory (simulated)"
    assert "Traceback (most recent call last)" in job.traceback and "broken" in job.traceback
    assert execute(job.pk, "w:1") == "not claimed"  # a failed job runs again only by retry


def test_it_rolls_out_twenty_questions_into_a_project_and_skips_stored_episodes_on_a_rerun(personas):
    from nlac_core.backends.fake import FakeBackend
    from webapp.jobs import loaded_model

    policy = FakeBackend(model="guesser", responder=lambda r: "Is it a cat?", scorer=lambda r: 0.0)
    loaded_model.override(lambda config, checkpoint: policy)
    try:
        job = lifecycle.check_create_job(personas["researcher"], "rollout",
                                         {"env": "twenty_questions", "tasks": 3, "trials": 2, "max_turns": 2,
                                          "project": "20Q test"})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED
        job.refresh_from_db()
        stored = Trajectory.objects.filter(project__name="20Q test")
        assert stored.count() == 6 and all(t.meta["job"] == job.pk for t in stored)
        assert job.outputs["trajectories"] == 6 and job.outputs["success_rate"] == pytest.approx(2 / 6)  # Cat
        assert [p["episode"] for p in job.metrics] == [1, 2, 3, 4, 5, 6]
        assert {t.source_checkpoint for t in stored} == {job.checkpoint.path}
        assert {t.source_model for t in stored} == {"smollm2-135m-instruct"}
        Job.objects.filter(pk=job.pk).update(status=Job.QUEUED, worker="")
        calls_before = len(policy.calls)
        assert execute(job.pk, "w:2") == Job.SUCCEEDED
        assert len(policy.calls) == calls_before and stored.count() == 6  # nothing played or stored twice
    finally:
        loaded_model.override(None)


def test_it_exports_the_selection_as_lossless_jsonl(tau_project, personas):
    from nlac_core.formats import nlac_jsonl
    from webapp.jobs.runners.export import export_path

    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:5])
    job = lifecycle.check_create_job(personas["researcher"], "export", {}, {"trajectory_ids": ids})
    assert job.queue == "cpu"
    assert execute(job.pk, "w:1") == Job.SUCCEEDED
    job.refresh_from_db()
    records = [item.record for item in nlac_jsonl.read(export_path(job.pk))]
    assert len(records) == 5 == job.outputs["trajectories"]
    assert [r.content_hash() for r in records] == list(
        Trajectory.objects.filter(pk__in=ids).order_by("id").values_list("content_hash", flat=True))


def test_it_writes_bellman_targets_with_the_ema_twin_as_the_target_network(tau_project, personas):
    from nlac_core.backends.fake import FakeBackend
    from webapp.jobs import loaded_model
    from webapp.jobs.models import Checkpoint, StepTarget
    from webapp.jobs.services.checkpoints import embedded_checkpoint

    base = embedded_checkpoint()
    twin = Checkpoint.objects.create(name="ema", path=base.path + "-ema", ema_of=base)
    policy = FakeBackend(model="policy", responder=lambda r: " the user confirms", scorer=lambda r: 0.0)
    loaded_model.override(lambda config, checkpoint: policy)
    try:
        ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
        job = lifecycle.check_create_job(personas["researcher"], "backup",
                                         {"steps": "last", "next_action": "data", "chunk_size": 1},
                                         {"trajectory_ids": ids})
        from webapp.jobs.runners import backup as backup_runner

        assert backup_runner.target_network(job_config(job), base) == twin
        job = lifecycle.check_create_job(personas["researcher"], "backup",
                                         {"steps": "last", "next_action": "data", "target_checkpoint": base.pk},
                                         {"trajectory_ids": ids})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED
    finally:
        loaded_model.override(None)
    rows = list(StepTarget.objects.filter(job=job))
    assert len(rows) == 2 and all(r.terminal for r in rows)  # the last step of an episode has no successor
    assert all(r.prompt_id.startswith("backup_terminal@") and r.target_checkpoint == base for r in rows)
    job.refresh_from_db()
    assert job.outputs["targets"] == 2 and job.outputs["terminal"] == 2


def job_config(job):
    from webapp.jobs.kinds import job_kind

    return job_kind(job.kind).config.parse(job.config)


def test_it_refuses_to_train_a_critic_on_steps_without_targets(tau_project, personas):
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:2])
    job = lifecycle.check_create_job(personas["researcher"], "train-critic", {"max_steps": 2},
                                     {"trajectory_ids": ids})
    assert execute(job.pk, "w:1") == Job.FAILED
    job.refresh_from_db()
    assert "have no Bellman targets: run a backup job on them first" in job.error


def test_it_evaluates_a_checkpoint_into_the_evaluations_project(personas):
    from nlac_core.backends.fake import FakeBackend
    from webapp.jobs import loaded_model

    loaded_model.override(lambda config, checkpoint: FakeBackend(responder=lambda r: "$\\boxed{3}$"))
    try:
        job = lifecycle.check_create_job(personas["researcher"], "evaluate", {"env": "math", "tasks": 3})
        assert job.config["temperature"] == 0.0
        assert execute(job.pk, "w:1") == Job.SUCCEEDED
    finally:
        loaded_model.override(None)
    job.refresh_from_db()
    assert job.outputs["trajectories"] == 3 and 0 <= job.outputs["success_rate"] <= 1
    assert Trajectory.objects.filter(project__name="evaluations", meta__job=job.pk).count() == 3


def test_it_fails_a_job_whose_stored_config_it_cannot_read_instead_of_leaving_it_running(tau_project, personas):
    job = critique_job(tau_project, personas["researcher"], n=1)
    Job.objects.filter(pk=job.pk).update(config={"k": "many"})  # written by another version, or by hand
    assert execute(job.pk, "w:1") == Job.FAILED
    job.refresh_from_db()
    assert job.status == Job.FAILED and "k: expected a whole number, got 'many'" in job.error


def test_it_writes_nothing_for_a_worker_that_was_reaped_while_it_worked(tau_project, personas):
    from webapp.jobs.runners.base import JobContext, JobLost
    from webapp.jobs.runners.export import export_path, run_export

    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:3])
    job = lifecycle.check_create_job(personas["researcher"], "export", {}, {"trajectory_ids": ids})
    stale = JobContext(lifecycle.claim(job.pk, "w:1"), "w:1")
    Job.objects.filter(pk=job.pk).update(status=Job.QUEUED, worker="")  # reaped while w:1 stalled
    lifecycle.claim(job.pk, "w:2")
    with pytest.raises(JobLost, match="no longer owned by w:1"):  # its first progress report finds out
        run_export(stale)
    assert not export_path(job.pk).exists() and not list(export_path(job.pk).parent.glob("*.part"))
    assert not lifecycle.do_finish(job.pk, "w:1", Job.SUCCEEDED)
    assert Job.objects.get(pk=job.pk).worker == "w:2"



def test_it_refines_critiqued_steps_checking_the_action_format(tau_project, personas):
    from nlac_core.backends.fake import FakeBackend
    from webapp.jobs import loaded_model
    from webapp.jobs.models import StepRefinement

    call = 'TOOL_CALL: {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}'
    loaded_model.override(lambda config, checkpoint: FakeBackend(
        responder=lambda r: call if "improved action" in r.messages[-1]["content"].lower() else " fine",
        scorer=lambda r: 0.0))
    try:
        critiqued = critique_job(tau_project, personas["researcher"], n=3)
        assert execute(critiqued.pk, "w:1") == Job.SUCCEEDED
        ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True)[:4])  # one not critiqued
        # the scripted critic ties every verdict, so "optimal" wins: refine those steps anyway here
        job = lifecycle.check_create_job(personas["researcher"], "refine", {"chunk_size": 2, "refine_optimal": True},
                                         {"trajectory_ids": ids})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED
        kept = lifecycle.check_create_job(personas["researcher"], "refine", {"chunk_size": 2},
                                          {"trajectory_ids": ids})
        assert execute(kept.pk, "w:1") == Job.SUCCEEDED
    finally:
        loaded_model.override(None)
    kept.refresh_from_db()
    assert {k: kept.outputs[k] for k in ("refined", "kept_optimal", "kept_won", "skipped_no_critique")} == {
        "refined": 0, "kept_optimal": 3, "kept_won": 0,
        "skipped_no_critique": sum(t.n_steps for t in tau_project.trajectories.filter(pk__in=ids)) - 3}
    for r in StepRefinement.objects.filter(job=kept):  # the original action, marked kept, never rewritten
        assert r.record["kept"] == "optimal" and r.record["refined_action"] == r.record["original_action"]
        assert not r.changed
    rows = list(StepRefinement.objects.filter(job=job).select_related("critique", "trajectory"))
    assert len(rows) == 3 and {r.critique.job_id for r in rows} == {critiqued.pk}
    for r in rows:  # valid exactly where the trajectory's own tools include the one the refinement calls
        used = {c["name"] for m in r.trajectory.messages.filter(role="assistant") for c in m.tool_calls}
        assert r.valid == ("get_user_details" in used), r.record["error"]
        assert r.valid or r.record["error"].startswith(("unknown tool 'get_user_details'", "no tools are known here"))
    job.refresh_from_db()
    assert job.outputs["refinements"] == 3 and job.outputs["valid"] == sum(r.valid for r in rows) >= 1


@pytest.mark.slow
def test_it_distils_refined_actions_into_a_registered_policy_checkpoint(tau_project, personas):
    from nlac_core.backends.fake import FakeBackend
    from webapp.jobs import loaded_model
    from webapp.jobs.models import Checkpoint

    loaded_model.override(lambda config, checkpoint: FakeBackend(
        responder=lambda r: "I will look up your reservation first." if "improved action" in
        r.messages[-1]["content"].lower() else " fine", scorer=lambda r: 0.0))
    try:
        critiqued = critique_job(tau_project, personas["researcher"], n=2)
        execute(critiqued.pk, "w:1")
        ids = critiqued.selection["trajectory_ids"]
        # the scripted critic ties every verdict ("optimal" wins): rewrite those steps anyway, to distil them
        refined = lifecycle.check_create_job(personas["researcher"], "refine", {"refine_optimal": True},
                                             {"trajectory_ids": ids})
        execute(refined.pk, "w:1")
    finally:
        loaded_model.override(None)
    job = lifecycle.check_create_job(personas["researcher"], "distill-policy",
                                     {"max_steps": 1, "max_length": 768, "max_state_chars": 600,
                                      "name": "policy-test"}, {"trajectory_ids": ids})
    assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
    job.refresh_from_db()
    policy = Checkpoint.objects.get(pk=job.outputs["checkpoint_produced"])
    assert policy.kind == "policy" and policy.produced_by == job and job.outputs["records"] == 2
    assert [p["step"] for p in job.metrics] == [1]


def test_it_trains_the_critic_on_outcome_words_drawn_from_the_targets_p_success(tau_project, personas):
    """train-critic's successor records: each Bellman target's OUTCOME word is drawn from its P(success) (seeded
    per step by the job's seed) unless ``outcome_target`` asks for the likelier word; a bad choice is refused."""
    from types import SimpleNamespace

    from nlac_core.backends.base import Provenance
    from nlac_core.outputs import BellmanTarget, to_json
    from nlac_core.state import steps_of
    from nlac_core.successor import ref_of
    from webapp.jobs.configs import ConfigError, TrainCriticJob
    from webapp.jobs.models import StepTarget
    from webapp.jobs.runners.train import training_records
    from webapp.trajectories.services.exports import iter_with_ids

    prov = Provenance("backup@test", "fake", "fake", {})
    backup_job = lifecycle.check_create_job(personas["researcher"], "backup", {"steps": "all"},
                                            {"trajectory_ids": [tau_project.trajectories.order_by("id")[0].pk]})
    ids = []
    for pk, record in iter_with_ids(tau_project.trajectories.filter(pk__in=tau_project.trajectories.order_by("id")
                                                                     .values_list("id", flat=True)[:6])):
        ids.append(pk)
        for step in steps_of(record):
            target = BellmanTarget(ref_of(step), "the user is helped", 0.75, False, prov)
            StepTarget.objects.create(trajectory_id=pk, step_index=step.index, job=backup_job, success_prob=0.75,
                                      prompt_id="backup@test", record=to_json(target))
    ctx = SimpleNamespace(selection=SimpleNamespace(trajectory_ids=ids), log=lambda *a: None)

    def words(**config):
        records = training_records(ctx, TrainCriticJob.parse({"source": "targets", **config}))
        return [r["completion"][0]["content"].rsplit("OUTCOME: ", 1)[1] for r in records]

    sampled = words()
    assert len(sampled) > 40 and 0.55 < sampled.count("success") / len(sampled) < 0.95
    assert words() == sampled and words(seed=3) != sampled
    assert set(words(outcome_target="threshold")) == {"success"}
    with pytest.raises(ConfigError) as bad:
        TrainCriticJob.parse({"outcome_target": "mode"})
    assert bad.value.field == "outcome_target"
