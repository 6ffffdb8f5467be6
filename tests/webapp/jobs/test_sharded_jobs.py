"""Step jobs split into shards (``webapp/jobs/runners/shards.py``), run in this process with a scripted model:
the parent fans out, waits without a worker, and reports over all shards; results are those of one shard."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nlac_core.backends.fake import FakeBackend
from webapp.jobs import loaded_model
from webapp.jobs.configs import ConfigError, CritiqueJob
from webapp.jobs.models import Job, StepCritique, StepTarget
from webapp.jobs.runners.base import execute
from webapp.jobs.runners.shards import span
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)


class SeedEcho(FakeBackend):
    """Writes the sampling seed and the batch size into every completion: a row differs unless its chunk was the
    same batch with the same seed."""

    def generate(self, requests, spec):
        out = super().generate(requests, spec)
        return [replace(c, text=f"{c.text} (seed {spec.seed}, batch {len(out)})") for c in out]


class RowSeedEcho(FakeBackend):
    """Writes each row's sampling seed into its completion (rollouts seed each episode's rows by task and trial;
    the batch is whatever is still playing)."""

    def generate(self, requests, spec):
        return [replace(c, text=f"{c.text} (seed {spec.seed})") for c in super().generate(requests, spec)]


@pytest.fixture
def echo_model():
    loaded_model.override(lambda config, checkpoint: SeedEcho(responder=lambda r: " the user confirms"))
    yield
    loaded_model.override(None)


def _job(project, user, kind="critique", n=6, **config):
    ids = list(project.trajectories.order_by("id").values_list("id", flat=True)[:n])
    return lifecycle.check_create_job(user, kind, {"steps": "first", "chunk_size": 2, "temperature": 0.7,
                                                   **config}, {"trajectory_ids": ids})


def _run_sharded(job: Job) -> Job:
    assert execute(job.pk, "w:parent") == Job.WAITING
    shards = list(job.children.order_by("id"))
    for i, shard in enumerate(shards):
        assert execute(shard.pk, f"w:{i}") == Job.SUCCEEDED
    job.refresh_from_db()
    assert job.status == Job.QUEUED  # the last shard's end queued the parent again
    assert execute(job.pk, "w:parent") == Job.SUCCEEDED
    job.refresh_from_db()
    return job


def _rows(table, jobs):
    return {(r.trajectory_id, r.step_index): (r.verdict if table is StepCritique else r.terminal, r.record)
            for r in table.objects.filter(job__in=jobs)}


def test_it_splits_whole_chunks_evenly_and_covers_every_item_once():
    for n, chunk, shards in [(6, 2, 2), (7, 2, 3), (5, 8, 2), (100, 8, 7), (3, 1, 5)]:
        spans = [span(n, chunk, i, shards) for i in range(shards)]
        assert [i for s in spans for i in s] == list(range(n))
        assert all(s.start % chunk == 0 for s in spans if len(s))


def test_it_gives_the_rows_of_the_one_shard_run_and_reports_over_all_shards(tau_project, personas, echo_model):
    single = _job(tau_project, personas["researcher"])
    assert execute(single.pk, "w:single") == Job.SUCCEEDED
    single.refresh_from_db()
    sharded = _run_sharded(_job(tau_project, personas["researcher"], shards=2))
    shards = list(sharded.children.order_by("id"))
    assert [c.config["shard"] for c in shards] == [0, 1] and all(c.kind == "critique" for c in shards)
    assert [c.progress_total for c in shards] == [2, 4]  # 3 chunks of 2: one, then two
    assert not StepCritique.objects.filter(job=sharded).exists()  # the parent runs no model
    assert _rows(StepCritique, [c.pk for c in shards]) == _rows(StepCritique, [single.pk])
    assert "(seed 2, batch 2)" in str(_rows(StepCritique, [shards[1].pk]))  # the seed follows the chunk's place
    assert sharded.outputs["shards"] == [c.pk for c in shards]
    assert {k: sharded.outputs[k] for k in ("critiques", "steps", "verdicts")} == \
        {k: single.outputs[k] for k in ("critiques", "steps", "verdicts")}
    assert (sharded.progress_done, sharded.progress_total) == (6, 6)


def test_it_gives_backup_shards_the_target_network_the_parent_resolved(tau_project, personas, echo_model):
    single = _job(tau_project, personas["researcher"], kind="backup")
    assert execute(single.pk, "w:single") == Job.SUCCEEDED
    sharded = _run_sharded(_job(tau_project, personas["researcher"], kind="backup", shards=3))
    shards = list(sharded.children.order_by("id"))
    assert {c.config["target_checkpoint"] for c in shards} == {sharded.outputs["target_checkpoint"]}
    assert _rows(StepTarget, [c.pk for c in shards]) == _rows(StepTarget, [single.pk])
    assert sharded.outputs["targets"] == 6


def test_it_fails_with_a_failed_shard_and_a_retry_reruns_only_that_shard(tau_project, personas, echo_model):
    job = _job(tau_project, personas["researcher"], shards=2)
    assert execute(job.pk, "w:parent") == Job.WAITING
    first, second = job.children.order_by("id")
    assert execute(first.pk, "w:0") == Job.SUCCEEDED
    loaded_model.override(lambda config, checkpoint: FakeBackend(responder=lambda r: 1 / 0))
    assert execute(second.pk, "w:1") == Job.FAILED
    assert execute(job.pk, "w:parent") == Job.FAILED
    job.refresh_from_db()
    assert f"job {second.pk} failed" in job.error
    loaded_model.override(lambda config, checkpoint: SeedEcho(responder=lambda r: " the user confirms"))
    lifecycle.do_retry(job)  # the parent's retry retries the failed shard
    second.refresh_from_db()
    first.refresh_from_db()
    assert second.status == Job.QUEUED and first.status == Job.SUCCEEDED
    assert execute(job.pk, "w:parent") == Job.WAITING
    assert execute(second.pk, "w:1") == Job.SUCCEEDED
    assert execute(job.pk, "w:parent") == Job.SUCCEEDED
    rows = StepCritique.objects.filter(job__in=[first.pk, second.pk])
    assert rows.count() == 6 and len({(r.trajectory_id, r.step_index) for r in rows}) == 6


def test_it_cancels_every_shard_with_the_parent(tau_project, personas, echo_model):
    job = _job(tau_project, personas["researcher"], shards=3)
    assert execute(job.pk, "w:parent") == Job.WAITING
    lifecycle.do_request_cancel(job)
    job.refresh_from_db()
    assert job.status == Job.CANCELLED
    assert set(job.children.values_list("status", flat=True)) == {Job.CANCELLED}
    lifecycle.do_retry(job)  # a retry of the parent resumes its cancelled shards
    assert execute(job.pk, "w:parent") == Job.WAITING
    shards = list(job.children.order_by("id"))
    assert {s.status for s in shards} == {Job.QUEUED}
    for i, shard in enumerate(shards):
        assert execute(shard.pk, f"w:{i}") == Job.SUCCEEDED
    assert execute(job.pk, "w:parent") == Job.SUCCEEDED
    assert StepCritique.objects.filter(job__in=[s.pk for s in shards]).count() == 6


def test_it_refuses_a_shard_number_out_of_range():
    with pytest.raises(ConfigError) as err:
        CritiqueJob.parse({"shards": 2, "shard": 2})
    assert err.value.field == "shard" and "below shards (2)" in err.value.message
    with pytest.raises(ConfigError) as err:
        CritiqueJob.parse({"shards": 65})
    assert err.value.field == "shards"


def test_it_shows_the_shards_and_their_progress_added_up_on_the_parent_page(tau_project, personas, echo_model,
                                                                            client_for):
    job = _job(tau_project, personas["researcher"], shards=2)
    assert execute(job.pk, "w:parent") == Job.WAITING
    first, second = job.children.order_by("id")
    assert execute(first.pk, "w:0") == Job.SUCCEEDED
    page = client_for("researcher").get(f"/jobs/{job.pk}/").content.decode()
    assert "2/6 steps over 2 shards" in page
    assert f'href="/jobs/{first.pk}/"' in page and "1 of 2" in page and "2 of 2" in page
    assert page.count("status-succeeded") == 1 and "status-queued" in page
    assert 'id="job-critiques"' in page  # the shards' rows, on the parent's page


def test_it_shards_a_rollout_by_task_and_trial_with_the_episodes_of_one_job(personas):
    from webapp.trajectories.models import Trajectory

    loaded_model.override(lambda config, checkpoint: RowSeedEcho(model="guesser", responder=lambda r: "Is it a cat?",
                                                                 scorer=lambda r: 0.0))
    try:
        def rollout(project, **extra):
            return lifecycle.check_create_job(personas["researcher"], "rollout", {
                "env": "twenty_questions", "tasks": 3, "trials": 2, "max_turns": 2, "project": project, **extra})

        single = rollout("20Q single")
        assert execute(single.pk, "w:single") == Job.SUCCEEDED
        sharded = _run_sharded(rollout("20Q sharded", shards=4))
        shards = list(sharded.children.order_by("id"))
        assert [c.progress_total for c in shards] == [1, 2, 1, 2]

        def episodes(name):
            return sorted((t.task.external_id, t.trial, t.reward, t.meta["trial_seed"],
                           [m.content for m in t.messages.order_by("position")])
                          for t in Trajectory.objects.filter(project__name=name))

        assert len(episodes("20Q sharded")) == 6 and episodes("20Q sharded") == episodes("20Q single")
        assert {t.meta["job"] for t in Trajectory.objects.filter(project__name="20Q sharded")} == \
            {c.pk for c in shards}
        single.refresh_from_db()
        for key in ("trajectories", "success_rate", "mean_reward", "pass_hat_k"):
            assert sharded.outputs[key] == single.outputs[key]
    finally:
        loaded_model.override(None)
