"""critic-data: the runtime critic's fine-tuning data from hard tasks, then a snapshot and a train-critic job.

1. self-play: the actor plays each training task ``k`` times (stored, resumable, ``meta.arm`` "self-play");
2. hard tasks and first errors (``nlac_core.critic_data``): intervene targets at the first wrong action of each
   failed episode of a hard task, approve targets on the actions before it and on the hard tasks' successes,
   balanced by ``approve_ratio``; failed episodes whose error the gold actions cannot place go to an
   annotator queue (their corrections are gold for the same dataset kind);
3. with ``validate_feedback``, an intervene target is kept only if re-running the episode from that step with
   its feedback succeeds (``nlac_core.counterfactual``, kind "feedback");
4. the targets are stored as ``runtime-label`` critiques of their steps, a runtime-critic dataset gets a new
   snapshot built from them, and (``train``) a train-critic job is launched on it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib.auth import get_user_model

from nlac_core.backends.base import Provenance, SamplingSpec
from nlac_core.counterfactual import CounterfactualCase, rerun
from nlac_core.critic_data import balance, hard_tasks, runtime_labels, unlocalised
from nlac_core.envs import make_env
from nlac_core.outputs import StepRef, to_json
from nlac_core.rollout import rollout
from nlac_core.supervision import as_critique
from webapp.accounts.roles import ANNOTATOR
from webapp.annotation.models import Queue
from webapp.annotation.services.queues import QueueSpec, do_create_queue
from webapp.datasets.models import Dataset, Snapshot
from webapp.datasets.services.build import do_build_snapshot, do_create_snapshot
from webapp.datasets.services.datasets import check_create_dataset
from webapp.jobs import loaded_model
from webapp.jobs.configs import CriticDataJob
from webapp.jobs.env_model import environment_backend
from webapp.jobs.models import StepCritique
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.supervision import EpisodeStore
from webapp.jobs.services import lifecycle
from webapp.trajectories.models import Message, Project, Trajectory
from webapp.trajectories.services.exports import iter_with_ids
from webapp.trajectories.services.projects import do_get_or_create_project

LABEL_PROMPT_ID = "first_error@gold"  # where a label came from: first-error localisation by gold actions


def run_critic_data(ctx: JobContext) -> dict[str, Any]:
    config: CriticDataJob = ctx.config  # type: ignore[assignment]
    if ctx.selection.trajectory_ids:
        return _label_recorded(ctx, config)
    checkpoint = ctx.model_checkpoint(config)
    project = do_get_or_create_project(config.project or f"{config.env} critic data", domain=config.env)
    mine = Trajectory.objects.filter(project=project, meta__job=ctx.job.pk)
    actor = loaded_model.backend_for(config, checkpoint)
    # the simulated user is the environment's model, never the actor playing against it
    with environment_backend(config, actor, checkpoint) as (env_llm, env_label):
        return _self_play_and_label(ctx, config, checkpoint, actor, project, mine,
                                    make_env(config.env, oracle=env_llm), env_label)


def _self_play_and_label(ctx: JobContext, config, checkpoint, actor, project, mine, env, env_label: str,
                         ) -> dict[str, Any]:
    tasks = env.tasks(config.split, config.tasks)
    spec = SamplingSpec(max_new_tokens=config.max_new_tokens or env.default_max_new_tokens,
                        temperature=config.temperature, seed=config.seed)
    source = {"source_model": checkpoint.name if checkpoint else config.endpoint_model,
              "source_checkpoint": checkpoint.path if checkpoint else ""}
    total = len(tasks) * config.k
    done = set(mine.filter(meta__arm="self-play").values_list("task__external_id", "trial"))
    ctx.log(f"self-play: {len(tasks)} {config.split} tasks x {config.k} = {total} episodes, {len(done)} stored")
    ctx.progress(len(done), total, "self-play")
    store = EpisodeStore(ctx, project, "self-play", env_model=env_label)
    try:
        rollout(env, actor, tasks, trials=config.k, spec=spec, max_turns=config.max_turns, skip=done,
                progress=lambda d, t: ctx.progress(len(done) + d, total, "self-play"), should_stop=ctx.should_stop,
                on_trajectory=store.add, **source)
    finally:
        store.flush()
    if ctx.should_stop(fresh=True):
        return {"project": project.slug, "stopped": "during self-play"}

    ids: dict[str, int] = {}
    records = []
    for tid, record in iter_with_ids(mine.filter(meta__arm="self-play")):
        ids[record.content_hash()] = tid
        records.append(record)
    difficulties = hard_tasks(records, config.k)
    # with validation, the approvals are balanced against the interventions that pass it (below)
    labels = runtime_labels(records, difficulties, None if config.validate_feedback else config.approve_ratio,
                            config.seed, at_turn_cap=config.at_turn_cap)
    hard = [d for d in difficulties if d.hard]
    ctx.log(f"{len(hard)} hard tasks of {len(difficulties)} ({sum(d.label == 'unsolved' for d in hard)} unsolved); "
            f"{sum(x.decision == 'intervene' for x in labels)} intervene and "
            f"{sum(x.decision == 'approve' for x in labels)} approve targets")
    validation: dict[str, Any] = {}
    if config.validate_feedback:
        validated, validation = _validated(ctx, env, actor, spec, config, records, labels, project, source,
                                           env_label)
        if validated is None:
            return {"project": project.slug, "stopped": "during validation", "validation": validation}
        labels = balance(validated, config.approve_ratio, config.seed)
    return _targets(ctx, config, project, records, ids, difficulties, labels, validation)


def _targets(ctx: JobContext, config, project, records, ids: dict[str, int], difficulties, labels,
             validation: dict[str, Any]) -> dict[str, Any]:
    """Store the labels, queue the failed episodes no first error was found in, build the snapshot (and train)."""
    hard = [d for d in difficulties if d.hard]
    written = _store_labels(ctx, labels, ids)
    not_placed = unlocalised(records, difficulties, config.at_turn_cap)
    queue = _queue_unlocalised(ctx, project, [ids[h] for h in not_placed])
    out: dict[str, Any] = {
        "project": project.slug, "episodes": len(records),
        "tasks": {"all": len(difficulties), "hard": len(hard),
                  "unsolved": sum(d.label == "unsolved" for d in hard),
                  "unreliable": sum(d.label == "unreliable" for d in hard)},
        "targets": {"intervene": sum(x.decision == "intervene" for x in labels),
                    "approve": sum(x.decision == "approve" for x in labels), "stored": written},
        "unlocalised_episodes": len(not_placed), "queue": queue,
        **({"validation": validation} if validation else {})}
    if not labels:
        ctx.log("no targets: no failed episode of a hard task had a localisable first error")
        return out
    return {**out, **_snapshot_and_training(ctx, config, project)}


def _label_recorded(ctx: JobContext, config: CriticDataJob) -> dict[str, Any]:
    """Recorded episodes as the pipeline's episodes (imported tau-bench / tau2-bench runs: offline data): no
    self-play and no model; hard tasks from all their trials, first errors from their tasks' gold actions."""
    selected = Trajectory.objects.filter(pk__in=ctx.selection.trajectory_ids)
    projects = sorted(set(selected.values_list("project_id", flat=True)))
    if len(projects) != 1:
        raise ValueError(f"the selected episodes belong to {len(projects)} projects: choose one project's, its "
                         "dataset holds the targets")
    if config.validate_feedback:
        raise ValueError("validate_feedback re-runs episodes in the environment: recorded episodes cannot be "
                         "re-run, turn it off")
    project = Project.objects.get(pk=projects[0])
    ids, records = {}, []
    for tid, record in iter_with_ids(selected):
        ids[record.content_hash()] = tid
        records.append(record)
    difficulties = hard_tasks(records)
    labels = runtime_labels(records, difficulties, config.approve_ratio, config.seed, at_turn_cap=config.at_turn_cap)
    ctx.log(f"{len(records)} recorded episodes of project {project.name!r}: "
            f"{sum(d.hard for d in difficulties)} hard tasks of {len(difficulties)}; "
            f"{sum(x.decision == 'intervene' for x in labels)} intervene and "
            f"{sum(x.decision == 'approve' for x in labels)} approve targets")
    return {**_targets(ctx, config, project, records, ids, difficulties, labels, {}), "recorded": True}


def _validated(ctx, env, actor, spec, config, records, labels, project, source, env_label=""):
    """Keep an intervene target only if re-running from its step with its feedback succeeds."""
    by_hash = {r.content_hash(): r for r in records}
    cases = [CounterfactualCase(by_hash[x.trajectory], x.step_index, "feedback", x.feedback)
             for x in labels if x.decision == "intervene"]
    # a resumed job: the re-runs stored before count as played (keyed like the supervised job's counterfactuals)
    outcomes = {(m["of"], m["step_index"]): bool(success) for m, success in Trajectory.objects.filter(
        project=project, meta__job=ctx.job.pk, meta__arm="validation").values_list("meta__counterfactual", "success")
        if m}
    todo = [c for c in cases if (c.trajectory.content_hash(), c.step_index) not in outcomes]
    ctx.progress(len(cases) - len(todo), len(cases), "validation")
    store = EpisodeStore(ctx, project, "validation", env_model=env_label)
    try:
        results = rerun(env, actor, todo, None, spec=spec, max_turns=config.max_turns, should_stop=ctx.should_stop,
                        on_trajectory=lambda case, record: (store.add(record), ctx.progress(
                            len(cases) - len(todo) + store.count, len(cases), "validation")), **source)
    finally:
        store.flush()
    outcomes.update({(c.trajectory.content_hash(), c.step_index): r.success for c, r in results})
    if len(outcomes) < len(cases):
        return None, {"checked": len(outcomes), "of": len(cases)}  # stopped: not every target was validated
    passed = {key for key, success in outcomes.items() if success}
    kept = [x for x in labels if x.decision == "approve" or (x.trajectory, x.step_index) in passed]
    ctx.log(f"validation: {len(passed)} of {len(cases)} intervene targets lead to a success with their feedback")
    return kept, {"checked": len(cases), "kept": len(passed)}


def _store_labels(ctx: JobContext, labels, ids: dict[str, int]) -> int:
    provenance = Provenance(prompt_id=LABEL_PROMPT_ID, backend="", model="")
    rows = []
    for x in labels:
        c = as_critique(StepRef(x.trajectory, x.step_index, x.task_id),
                        {"round": 0, "proposal": x.action_text, "decision": x.decision, "feedback": x.feedback,
                         "executed": True}, provenance)
        c = replace(c, reasoning=x.reason)
        rows.append(StepCritique(trajectory_id=ids[x.trajectory], step_index=x.step_index, job=ctx.job,
                                 verdict=c.verdict, parse_ok=True, mode="runtime-label", prompt_id=LABEL_PROMPT_ID,
                                 record=to_json(c)))
    if ctx.still_owner():
        StepCritique.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    return StepCritique.objects.filter(job=ctx.job, mode="runtime-label").count()


def _queue_unlocalised(ctx: JobContext, project, trajectory_ids: list[int]) -> int | None:
    """An annotator queue of the agent steps of failed episodes whose first error gold actions cannot place."""
    if not trajectory_ids:
        return None
    annotators = list(get_user_model().objects.filter(groups__name=ANNOTATOR, is_active=True).order_by("id"))
    if not annotators:
        ctx.log(f"{len(trajectory_ids)} failed episodes need a human to find their first error, but no user has "
                "the annotator role: no queue made")
        return None
    name = f"first errors of job {ctx.job.pk}"
    existing = Queue.objects.filter(project=project, name=name).first()
    if existing is not None:  # a resumed job: the queue was made before
        return existing.pk
    # scripted steps (the env's greeting) are not the agent's: left out (in Python: a JSON key that is missing
    # compares as NULL in SQL, so an exclude on it would drop every step without the key)
    steps = [(t, s) for t, s, meta in Message.objects.filter(trajectory_id__in=trajectory_ids, role="assistant",
                                                              step_index__isnull=False)
             .order_by("trajectory_id", "step_index").values_list("trajectory_id", "step_index", "meta")
             if not (meta or {}).get("scripted")]
    queue = do_create_queue(ctx.job.created_by, name, project,
                            QueueSpec(outcome="failed"), 1, annotators, [(t, s, None) for t, s in steps], 600,
                            "These episodes failed and their tasks have no gold actions that place the error. "
                            "Mark the first wrong action: verdict suboptimal or harmful, with what the agent "
                            "should have done as the suggestion; the actions before it optimal.")
    ctx.log(f"annotator queue {queue.pk}: {len(steps)} steps of {len(trajectory_ids)} failed episodes")
    return queue.pk


def _snapshot_and_training(ctx: JobContext, config: CriticDataJob, project) -> dict[str, Any]:
    name = config.dataset or f"runtime critic from job {ctx.job.pk}"
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is None:
        dataset = check_create_dataset(ctx.job.created_by, name, "runtime_critic", project,
                                       description=f"Made by critic-data job {ctx.job.pk}: the project's runtime "
                                                   "critic targets (first errors by gold actions, from every "
                                                   "critic-data job of the project) and its human corrections.")
    elif dataset.kind != "runtime_critic":
        raise ValueError(f"dataset {name!r} holds {dataset.get_kind_display()}, not runtime critic records")
    elif dataset.project_id != project.pk:
        raise ValueError(f"dataset {name!r} belongs to project {dataset.project.name!r}, not {project.name!r}: "
                         "choose another dataset name")
    notes = f"built by critic-data job {ctx.job.pk}"
    # a resumed job takes up the snapshot it began (a version already built stays as it is) and its train job
    snapshot = dataset.snapshots.filter(notes=notes).exclude(status=Snapshot.FAILED).order_by("-version").first() \
        or do_create_snapshot(dataset, ctx.job.created_by, notes)
    if snapshot.status != Snapshot.READY:
        snapshot = do_build_snapshot(snapshot, should_stop=ctx.should_stop, still_owner=ctx.still_owner)
    ctx.log(f"{snapshot.label}: {snapshot.n_records} records")
    out: dict[str, Any] = {"dataset": dataset.pk, "snapshot": snapshot.pk, "records": snapshot.n_records}
    if config.train:
        job = ctx.job.children.filter(kind="train-critic").first()
        if job is None:
            job = lifecycle.check_create_job(ctx.job.created_by, "train-critic", {
                "snapshot": snapshot.pk, "checkpoint": config.critic_checkpoint,
                "max_steps": config.train_max_steps, "learning_rate": config.learning_rate, "seed": config.seed,
                "name": f"runtime critic from job {ctx.job.pk}"}, parent=ctx.job)
        ctx.log(f"train-critic job {job.pk} launched on {snapshot.label}")
        out["train_job"] = job.pk
    return out
