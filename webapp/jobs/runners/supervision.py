"""supervised-rollout and replay-critic: the runtime critic at work, live and offline.

supervised-rollout plays N tasks x k trials in up to three phases, each resumable (what a phase stored is
skipped on a re-run, and seeds are derived, so the rest plays as it would have):

1. baseline (``both_arms``): the actor alone, the same tasks and seeds as the supervised arm;
2. supervised: the actor under the critic (``nlac_core.supervision``); each decided check is stored as a
   runtime critique of its step as the episodes are stored;
3. counterfactuals (``counterfactuals``): every intervened step re-run without its intervention, and a seeded
   sample of approved steps with a forced one (``nlac_core.counterfactual``).

Episodes carry ``meta.job`` and ``meta.arm``; the job's outputs are ``services.supervision.run_summary``.

replay-critic judges recorded actions offline (``nlac_core.supervision.judge_recorded``) in committed chunks.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from nlac_core.backends.base import SamplingSpec
from nlac_core.counterfactual import cases_of, rerun
from nlac_core.envs import make_env, needs_oracle
from nlac_core.outputs import to_json
from nlac_core.rollout import rollout
from nlac_core.supervision import SupervisionConfig, Supervisor, judge_recorded
from webapp.jobs import loaded_model
from webapp.jobs.configs import ModelChoice, ReplayCriticJob, SupervisedRolloutJob
from webapp.jobs.env_model import environment_backend
from webapp.jobs.models import StepCritique
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.critique import selected_steps
from webapp.jobs.runners.shards import fan_out, outputs_with_shards
from webapp.jobs.runners.steps import output_jobs, steps_to_do, write_in_chunks
from webapp.jobs.services.checkpoints import checkpoint_for
from webapp.jobs.services.supervision import do_store_runtime_checks, run_summary
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_records
from webapp.trajectories.services.imports import do_store_records
from webapp.trajectories.services.projects import do_get_or_create_project

STORE_EVERY = 8


class EpisodeStore:
    """Finished episodes of one phase, stored every few (only while this worker owns the job), marked with the
    job and the arm; ``after(ids)`` gets the stored trajectories' ids."""

    def __init__(self, ctx: JobContext, project, arm: str, after=None, env_model: str = "") -> None:
        self.ctx, self.project, self.arm, self.after = ctx, project, arm, after
        self.marks = {"env_model": env_model} if env_model else {}  # the environment's own model, when it has one
        self.pending: list = []
        self.count = 0

    def add(self, record, **meta: Any) -> None:
        self.pending.append(replace(record, meta={**record.meta, "job": self.ctx.job.pk, "arm": self.arm,
                                                  **self.marks, **meta}))
        self.count += 1
        self.ctx.metric(arm=self.arm, episode=self.count, reward=record.reward)
        if len(self.pending) >= STORE_EVERY:
            self.flush()

    def flush(self) -> None:
        if self.pending and self.ctx.still_owner():
            batch = do_store_records(self.project, list(self.pending), f"job {self.ctx.job.pk} {self.arm}",
                                     user=self.ctx.job.created_by)
            if self.after is not None:
                self.after(list(Trajectory.objects.filter(import_batch=batch).values_list("pk", flat=True)))
        self.pending.clear()


def _critic(config, actor, actor_checkpoint):
    """The critic's backend: the actor's own instance when they are the same model (one copy in memory)."""
    critic_checkpoint = checkpoint_for(config.critic_checkpoint)
    if (config.backend == config.critic_backend and actor_checkpoint is not None
            and actor_checkpoint.path == critic_checkpoint.path):
        return actor, critic_checkpoint, False
    choice = ModelChoice(backend=config.critic_backend, checkpoint=critic_checkpoint.pk, batch_size=config.batch_size)
    return loaded_model.extra_backend(choice, critic_checkpoint), critic_checkpoint, True


def run_supervised_rollout(ctx: JobContext) -> dict[str, Any]:
    config: SupervisedRolloutJob = ctx.config  # type: ignore[assignment]
    checkpoint = ctx.model_checkpoint(config)
    project = do_get_or_create_project(config.project or f"{config.env} supervised", domain=config.env)
    mine = Trajectory.objects.filter(project=project, meta__job=ctx.job.pk)
    actor = loaded_model.backend_for(config, checkpoint)
    critic, critic_checkpoint, own_critic = _critic(config, actor, checkpoint)
    stack = contextlib.ExitStack()
    try:
        env_label = ""
        if needs_oracle(config.env):  # the simulated user / oracle: the environment's model, never the actor
            env_llm, env_label = stack.enter_context(environment_backend(config, actor, checkpoint))
            env = make_env(config.env, oracle=env_llm)
        else:
            env = make_env(config.env)
        tasks = env.tasks(config.task_split(), config.tasks)
        spec = SamplingSpec(max_new_tokens=config.max_new_tokens or env.default_max_new_tokens,
                            temperature=config.temperature, seed=config.seed)
        supervision = SupervisionConfig(max_rounds=config.max_rounds, max_interventions=config.max_interventions,
                                        where=config.where, feedback_tokens=config.feedback_tokens,
                                        calibrate=config.calibrate)
        label = checkpoint.name if checkpoint else config.endpoint_model
        source = {"source_model": label, "source_checkpoint": checkpoint.path if checkpoint else ""}
        arms = (["baseline"] if config.both_arms else []) + ["supervised"]
        total = len(tasks) * config.trials * len(arms)
        ctx.log(f"{config.env}: {len(tasks)} tasks x {config.trials} trials, arms {', '.join(arms)}; critic "
                f"{critic_checkpoint.name} (R={config.max_rounds}, I={config.max_interventions}, {config.where})")
        played = 0
        for arm in arms:
            if ctx.should_stop(fresh=True):
                break
            done = set(mine.filter(meta__arm=arm).values_list("task__external_id", "trial"))
            store = EpisodeStore(ctx, project, arm, after=(lambda ids: do_store_runtime_checks(
                ctx.job, ids, critic_checkpoint)) if arm == "supervised" else None, env_model=env_label)
            supervisor = Supervisor(actor, critic, supervision, actor_spec=env.policy_sampling(spec)) \
                if arm == "supervised" else None
            base = played + len(done)
            ctx.progress(base, total, arm)
            try:
                rollout(env, actor, tasks, trials=config.trials, spec=spec, max_turns=config.max_turns,
                        progress=lambda d, t, b=base, a=arm: ctx.progress(b + d, total, a),
                        should_stop=ctx.should_stop, on_trajectory=store.add, skip=done, supervisor=supervisor,
                        **source)
            finally:
                store.flush()
            if arm == "supervised" and ctx.still_owner():
                # the checks of episodes stored by a run that died before it stored them (idempotent)
                judged = StepCritique.objects.filter(job=ctx.job).values("trajectory_id")
                do_store_runtime_checks(ctx.job, list(mine.filter(meta__arm=arm).exclude(pk__in=judged)
                                                      .values_list("pk", flat=True)), critic_checkpoint)
            played += len(tasks) * config.trials
        if config.counterfactuals and not ctx.should_stop(fresh=True):
            supervised = list(iter_records(mine.filter(meta__arm="supervised")))
            seen = {(m["of"], m["step_index"], m["kind"]) for m in mine.filter(meta__arm="counterfactual")
                    .values_list("meta__counterfactual", flat=True) if m}
            cases = [c for c in cases_of(supervised, config.forced_sample, config.seed)
                     if (c.trajectory.content_hash(), c.step_index, c.kind) not in seen]
            ctx.log(f"counterfactuals: {len(cases)} re-runs to play ({len(seen)} already stored)")
            ctx.progress(len(seen), len(seen) + len(cases), "counterfactuals")
            store = EpisodeStore(ctx, project, "counterfactual", env_model=env_label)
            try:
                rerun(env, actor, cases, Supervisor(actor, critic, supervision, actor_spec=env.policy_sampling(spec)),
                      spec=spec, max_turns=config.max_turns, should_stop=ctx.should_stop,
                      on_trajectory=lambda case, record: (store.add(record), ctx.progress(
                          len(seen) + store.count, len(seen) + len(cases), "counterfactuals")), **source)
            finally:
                store.flush()
    finally:
        stack.close()
        if own_critic and hasattr(critic, "close"):
            critic.close()
    summary = run_summary(ctx.job, config.env)
    ctx.log(_describe(summary))
    return {"project": project.slug, "checkpoint": checkpoint.pk if checkpoint else None,
            "critic_checkpoint": critic_checkpoint.pk, "env_model": env_label, **summary}


def _describe(summary: dict[str, Any]) -> str:
    def pct(value) -> str:
        return "n/a" if value is None else f"{value:.0%}"

    parts = [f"intervention rate {pct(summary['interventions']['rate'])}"]
    for arm in ("baseline", "supervised"):
        if arm in summary:
            parts.append(f"{arm} success {pct(summary[arm]['success_rate'])}")
    cf = summary["counterfactual"]
    if cf["n"]:
        parts.append(f"helpfulness {pct(cf['helpfulness'])}, harmfulness {pct(cf['harmfulness'])} over {cf['n']} "
                     "re-runs")
    return "; ".join(parts)


def run_replay_critic(ctx: JobContext) -> dict[str, Any]:
    config: ReplayCriticJob = ctx.config  # type: ignore[assignment]
    items = selected_steps(ctx, config)
    if (stopped := fan_out(ctx, len(items))) is not None:
        return stopped
    work = steps_to_do(ctx, StepCritique, items, "replay", "judged")
    checkpoint = ctx.model_checkpoint(config)
    if work.todo:
        critic = loaded_model.backend_for(config, checkpoint)
        supervision = SupervisionConfig(where=config.where, feedback_tokens=config.feedback_tokens,
                                        max_state_chars=config.max_state_chars, calibrate=config.calibrate)

        def make_rows(chunk, start):  # scoring by likelihood: no sampling, no seed
            by_uid = {(step.trajectory.content_hash(), step.index): tid for tid, step in chunk}
            return [StepCritique(trajectory_id=by_uid[(c.step.trajectory_hash, c.step.step_index)],
                                 step_index=c.step.step_index, job=ctx.job, checkpoint=checkpoint,
                                 verdict=c.verdict, parse_ok=True, mode="runtime", prompt_id=c.provenance.prompt_id,
                                 record=to_json(c))
                    for c in judge_recorded(critic, [step for _, step in chunk], supervision)]

        write_in_chunks(ctx, work, config.chunk_size, make_rows, "judged")
    return outputs_with_shards(ctx, {"steps": work.total, "checkpoint": checkpoint.pk,
                                     **replay_summary(output_jobs(ctx))})


def replay_summary(jobs) -> dict[str, Any]:
    """How often the critic would have intervened, on the steps of failed and of successful episodes (the rows
    of ``jobs``: a job's id, or a list of them: a sharded job and its shards)."""
    jobs = jobs if isinstance(jobs, list) else [jobs]
    rows = StepCritique.objects.filter(job__in=jobs, mode="runtime").values_list("verdict", "trajectory__success")
    out: dict[str, Any] = {"judged": 0, "interventions": 0}
    for outcome in ("failed", "succeeded"):
        out[outcome] = {"judged": 0, "interventions": 0}
    for verdict, success in rows:
        part = out["succeeded" if success else "failed"]
        stop = verdict != "optimal"
        for bucket in (out, part):
            bucket["judged"] += 1
            bucket["interventions"] += stop
    for bucket in (out, out["failed"], out["succeeded"]):
        bucket["rate"] = bucket["interventions"] / bucket["judged"] if bucket["judged"] else None
    return out
