"""rollout: a policy plays an environment, N tasks x k trials; finished episodes are stored as they come.

Episodes go into a project (``config.project``, default "<env> rollouts") in
small batches, each marked with the job (``meta.job``) and the checkpoint as
its source. A re-run skips the (task, trial) slots already stored; the others
keep their derived seeds, so they play as they would have. Storing is
idempotent anyway (content hash per project).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nlac_core.backends.base import SamplingSpec
from nlac_core.envs import make_env, needs_oracle
from nlac_core.evaluation import compute_metrics
from nlac_core.rollout import rollout
from webapp.jobs import loaded_model
from webapp.jobs.configs import RolloutJob
from webapp.jobs.env_model import environment_backend
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.shards import fan_out, output_jobs, outputs_with_shards, span
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_records
from webapp.trajectories.services.imports import do_store_records
from webapp.trajectories.services.projects import do_get_or_create_project

STORE_EVERY = 8


def run_rollout(ctx: JobContext) -> dict[str, Any]:
    config: RolloutJob = ctx.config  # type: ignore[assignment]
    checkpoint = ctx.model_checkpoint(config)
    default_project = "evaluations" if ctx.job.kind == "evaluate" else f"{config.env} rollouts"
    project = do_get_or_create_project(config.project or default_project, domain=config.env)
    mine = Trajectory.objects.filter(project=project, meta__job__in=output_jobs(ctx))  # its shards' too
    done = set(mine.values_list("task__external_id", "trial"))
    backend = loaded_model.backend_for(config, checkpoint)
    if not needs_oracle(config.env):  # MATH has no model of its own
        return _play(ctx, config, project, mine, done, backend, checkpoint, make_env(config.env), "")
    with environment_backend(config, backend, checkpoint) as (env_llm, env_label):
        return _play(ctx, config, project, mine, done, backend, checkpoint, make_env(config.env, oracle=env_llm),
                     env_label)


def _play(ctx, config, project, mine, done, backend, checkpoint, env, env_label) -> dict[str, Any]:
    tasks = env.tasks(config.task_split(), config.tasks)
    slots = [(task.external_id, trial) for task in tasks for trial in range(config.trials)]
    if (stopped := fan_out(ctx, len(slots))) is not None:
        return stopped
    share = {slots[i] for i in span(len(slots), 1, config.shard, config.shards)}  # seeds are per (task, trial)
    done = {slot for slot in done if slot in share}
    skip = done | (set(slots) - share)
    total = len(share)
    ctx.log(f"{config.env}: {len(tasks)} tasks x {config.trials} trials = {len(slots)} episodes"
            + (f", {total} in shard {config.shard + 1} of {config.shards}" if config.shard is not None else "")
            + f", {len(done)} already stored in {project.name!r}")
    ctx.progress(len(done), total, "rollout")
    pending: list = []
    label = checkpoint.name if checkpoint else config.endpoint_model

    def store() -> None:
        if pending and ctx.still_owner():  # a worker reaped after a stall must not store what the new owner plays
            do_store_records(project, list(pending), f"job {ctx.job.pk} rollout", user=ctx.job.created_by)
        pending.clear()

    played = 0

    def finished(record) -> None:
        nonlocal played
        played += 1
        meta = {**record.meta, "job": ctx.job.pk, **({"env_model": env_label} if env_label else {})}
        pending.append(replace(record, meta=meta))
        ctx.metric(episode=len(done) + played, reward=record.reward)
        if len(pending) >= STORE_EVERY:
            store()

    spec = SamplingSpec(max_new_tokens=config.max_new_tokens or env.default_max_new_tokens,
                        temperature=config.temperature, seed=config.seed)
    try:
        rollout(env, backend, tasks, trials=config.trials, spec=spec, max_turns=config.max_turns,
                source_model=label, source_checkpoint=checkpoint.path if checkpoint else "",
                progress=lambda d, t: ctx.progress(len(done) + d, total), should_stop=ctx.should_stop,
                on_trajectory=finished, skip=skip)
    finally:
        store()
    stored = list(iter_records(mine))
    result = compute_metrics(stored, config.env)
    ctx.log(result.summary())
    return outputs_with_shards(ctx, {
            "project": project.slug, "trajectories": len(stored), "success_rate": result.success_rate,
            "mean_reward": result.mean_reward, "pass_hat_k": {str(k): v for k, v in result.pass_hat_k.items()},
            "mean_turns": result.mean_turns, "checkpoint": checkpoint.pk if checkpoint else None,
            "split": config.task_split() or "default", "env_model": env_label})
