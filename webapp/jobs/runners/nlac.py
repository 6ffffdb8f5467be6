"""nlac-iteration: one NLAC iteration as a parent job that runs a child job per phase.

    rollout -> backup -> critique -> refine -> train (policy+critic) -> EMA update (inline)

Each run of the parent looks at its children (recorded in its outputs by phase): a phase whose child
succeeded is done; a phase without a child gets one, and the parent waits (WAITING, no worker held) until
that child's end queues it again. A failed child fails the parent (a retry of the parent retries that
child); a cancelled child cancels it. The episodes of the rollout child are what every later phase works
on. The EMA update averages the target network toward the new checkpoint and registers the result as the
new checkpoint's twin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from nlac_core.ema import TargetSchedule, init_target, update_target
from nlac_core.replay import ReplayConfig, draw_trajectories
from webapp.jobs.configs import NlacIterationJob
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.runners.base import JobContext, WaitForChildren
from webapp.jobs.services import lifecycle
from webapp.jobs.services.checkpoints import checkpoint_for, do_register_checkpoint
from webapp.trajectories.models import Trajectory

PHASES = ("rollout", "backup", "critique", "refine", "train")


def _episodes(rollout: Job) -> list[int]:
    return list(Trajectory.objects.filter(meta__job=rollout.pk).order_by("id").values_list("pk", flat=True))


def _replay(config: NlacIterationJob, rollout: Job, fresh: list[int]) -> list[int]:
    """Stored trajectories of the rollout's project drawn from the replay buffer (``nlac_core.replay``): the
    environment's own and, for tool use, imported runs; never this iteration's fresh episodes."""
    stored = Trajectory.objects.filter(project__slug=rollout.outputs.get("project")).exclude(pk__in=fresh)
    candidates = [(pk, n) for pk, n, env in stored.values_list("pk", "n_steps", "meta__env")
                  if env == config.env or (config.env == "tool_use" and env is None)]
    fresh_steps = sum(Trajectory.objects.filter(pk__in=fresh).values_list("n_steps", flat=True))
    return draw_trajectories(fresh_steps, candidates, ReplayConfig(config.replay_size, config.fresh_fraction,
                                                                   config.seed))


def _child_request(phase: str, config: NlacIterationJob, online: Checkpoint, target: Checkpoint | None,
                   children: dict[str, Job], replayed: list[int]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(kind, config, selection) of the phase's child job; the phases after the rollout work on its episodes and
    on the trajectories drawn from the replay buffer."""
    if phase == "rollout":
        return "rollout", {"checkpoint": online.pk, "env": config.env, "split": config.train_split(),
                           "tasks": config.tasks,
                           "trials": config.trials, "max_turns": config.max_turns,
                           "temperature": config.temperature, "seed": config.seed, "project": config.project,
                           "env_checkpoint": config.env_checkpoint, "env_endpoint": config.env_endpoint,
                           "env_endpoint_model": config.env_endpoint_model}, {}
    fresh = _episodes(children["rollout"])
    if not fresh:
        raise ValueError(f"the rollout (job {children['rollout'].pk}) stored no episodes to learn from")
    selection = {"trajectory_ids": sorted({*fresh, *replayed})}
    common = {"checkpoint": online.pk, "seed": config.seed, "max_state_chars": config.max_state_chars}
    if phase == "backup":
        return "backup", {**common, "target_checkpoint": target.pk if target else None}, selection
    if phase == "critique":
        return "critique", common, selection
    if phase == "refine":
        return "refine", {**common, "rounds": config.refine_rounds, "critique_job": children["critique"].pk}, \
            selection
    return "train-critic", {"checkpoint": online.pk, "source": "nlac", "max_steps": config.max_steps,
                            "learning_rate": config.learning_rate, "lora": config.lora, "seed": config.seed,
                            "per_device_batch_size": config.per_device_batch_size, "max_length": config.max_length,
                            "max_state_chars": config.max_state_chars, "outcome_target": config.outcome_target,
                            "strategy": config.strategy}, \
        selection


def run_nlac_iteration(ctx: JobContext) -> dict[str, Any]:
    config: NlacIterationJob = ctx.config  # type: ignore[assignment]
    online = checkpoint_for(config.checkpoint)
    ctx.use_checkpoint(online)
    target = (Checkpoint.objects.get(pk=config.target_checkpoint) if config.target_checkpoint is not None
              else Checkpoint.objects.filter(ema_of=online).first())
    state = dict(ctx.job.outputs or {})
    ids: dict[str, int] = dict(state.get("children") or {})
    children = {phase: Job.objects.get(pk=pk) for phase, pk in ids.items()}
    for n, phase in enumerate(PHASES):
        ctx.progress(n, len(PHASES) + 1, phase)
        child = children.get(phase)
        if child is None:
            if phase != "rollout" and "replayed" not in state:  # drawn once, so every phase takes the same
                fresh = _episodes(children["rollout"])
                state["replayed"] = _replay(config, children["rollout"], fresh)
                ctx.log(f"replay buffer: {len(state['replayed'])} stored trajectories drawn beside the rollout's "
                        f"{len(fresh)} episodes")
            kind, child_config, selection = _child_request(phase, config, online, target, children,
                                                           state.get("replayed") or [])
            child = lifecycle.check_create_job(ctx.job.created_by, kind, child_config, selection, parent=ctx.job)
            ids[phase] = child.pk
            ctx.outputs(**{**state, "children": ids})
            raise WaitForChildren(f"phase {phase}: started job {child.pk} ({kind})")
        if child.status == Job.SUCCEEDED:
            continue
        if child.status == Job.CANCELLED:
            ctx.cancelled = True
            ctx.log(f"phase {phase}: job {child.pk} was cancelled")
            return {**state, "children": ids, "stopped_at": phase}
        if child.status == Job.FAILED:
            if state.get("failed_child") == child.pk:  # the parent is being retried: retry the child
                state.pop("failed_child")
                lifecycle.do_retry(child)
                ctx.outputs(**{**state, "children": ids})
                raise WaitForChildren(f"phase {phase}: retrying job {child.pk}")
            ctx.outputs(**{**state, "children": ids, "failed_child": child.pk})
            raise RuntimeError(f"phase {phase}: job {child.pk} ({child.kind}) failed: {child.error}")
        raise WaitForChildren(f"phase {phase}: job {child.pk} is {child.status}")

    trained = Checkpoint.objects.get(pk=children["train"].outputs["checkpoint_produced"])
    twin = _ema_twin(ctx, config, online, target, trained)
    ctx.progress(len(PHASES) + 1, len(PHASES) + 1, "ema")
    rollout = children["rollout"].outputs
    return {"children": ids, "checkpoint_produced": trained.pk, "ema_target": twin.pk,
            "replayed": state.get("replayed") or [],
            "rollout_success_rate": rollout.get("success_rate"), "rollout_mean_reward": rollout.get("mean_reward"),
            "rollout_split": rollout.get("split"), "env_model": rollout.get("env_model"),  # what the rate is of
            "train_loss": children["train"].outputs.get("train_loss")}


def _ema_twin(ctx: JobContext, config: NlacIterationJob, online: Checkpoint, target: Checkpoint | None,
              trained: Checkpoint) -> Checkpoint:
    """The target updated toward the trained model under the job's schedule (Polyak with tau, or a hard copy
    every N updates), written as a new directory: the trained model's twin."""
    existing = Checkpoint.objects.filter(ema_of=trained).first()
    if existing is not None:
        return existing
    out = Path(settings.NLAC_TRAIN_DIR) / f"job-{ctx.job.pk}-ema"
    if target is None:  # the first iteration: the target starts as a copy of the online model
        start = Path(settings.NLAC_TRAIN_DIR) / f"job-{ctx.job.pk}-ema-init"
        if not (start / "config.json").is_file():
            init_target(online.path, start)
        source = start
    else:
        source = Path(target.path)
    schedule = TargetSchedule(config.target_schedule, config.tau, config.target_every)
    update_target(source, trained.path, schedule, out_dir=out)
    ctx.log(f"target network updated ({schedule.describe()}) from {source} into {out}")
    return do_register_checkpoint(out, name=f"{trained.name}-ema", kind="ema", produced_by=ctx.job,
                                  parent=target or online, ema_of=trained)
