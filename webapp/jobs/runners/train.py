"""train-critic and distill-policy: SFT on what the selected trajectories' steps carry, into a new checkpoint.

distill-policy trains the policy on (state -> refined action) from valid refinements, without the critique.

The records: for each selected step, its newest Bellman target (``source="targets"``: successor SFT,
NLAC's critic) or newest parsed model critique (``"critiques"``), as TRL prompt/completion records with
provenance. Training runs in ``NLAC_TRAIN_DIR/job-<id>``, reports loss and tokens/s per step as the job's
metrics, stops at a cancel between steps (saving a checkpoint it can resume from), and resumes after a
crash from the trainer's last saved state. It runs on the worker host's training processes
(``NLAC_TRAIN_PROCESSES``, ``nlac_core.training.distributed``: accelerate launch, DDP or the job's strategy).
The result is registered with its lineage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings

from nlac_core import sft_data
from nlac_core.outputs import from_json
from nlac_core.training import train
from webapp.datasets.models import Snapshot
from webapp.datasets.services.build import snapshot_records
from webapp.jobs.configs import DistillPolicyJob, TrainCriticJob
from webapp.jobs.loaded_model import training_launch
from webapp.jobs.models import StepCritique, StepRefinement, StepTarget
from webapp.jobs.runners.base import JobContext
from webapp.jobs.services.checkpoints import checkpoint_for, do_register_checkpoint
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_records


def training_records(ctx: JobContext, config: TrainCriticJob) -> list[dict[str, Any]]:
    if config.snapshot is not None:
        return _snapshot_records(ctx, config)
    ids = ctx.selection.trajectory_ids
    if config.source == "refinements":
        return _distillation_records(ids, config)
    if config.source == "nlac":  # one shared model: the critic's targets and the policy's refined actions
        critic = training_records(ctx, config.model_copy(update={"source": "targets"}))
        try:
            policy = _distillation_records(ids, DistillPolicyJob(only_changed=False))
        except ValueError:  # no refinement kept the action format (a small model often breaks it)
            policy = []
        ctx.log(f"{len(critic)} critic records (Bellman targets), {len(policy)} policy records (valid refined "
                "actions)" + ("; no refinement was valid, so only the critic learns this round" if not policy else ""))
        return critic + policy
    model = StepTarget if config.source == "targets" else StepCritique
    rows = model.objects.filter(trajectory_id__in=ids)
    if config.source == "critiques":
        rows = rows.filter(parse_ok=True)
    newest = rows.newest_per_step()
    if not newest:
        what, job = ("Bellman targets", "backup") if config.source == "targets" else ("parsed critiques", "critique")
        raise ValueError(f"the selected trajectories have no {what}: run a {job} job on them first")
    index = sft_data.StepIndex(iter_records(Trajectory.objects.filter(pk__in={k[0] for k in newest})))
    records = [from_json(r.record) for r in newest.values()]
    if config.source == "targets":
        return sft_data.successor_records(records, index, config.max_state_chars, config.outcome_target,
                                          config.seed)
    return sft_data.critique_records(records, index, max_state_chars=config.max_state_chars)


def _snapshot_records(ctx: JobContext, config: TrainCriticJob) -> list[dict[str, Any]]:
    """The train split of the pinned snapshot, as frozen when it was built (its provenance kept)."""
    snapshot = Snapshot.objects.select_related("dataset").get(pk=config.snapshot)
    records = list(snapshot_records(snapshot, "train"))
    if not records:
        raise ValueError(f"{snapshot.label} has no records in its train split")
    ctx.log(f"training on the train split of {snapshot.label}: {len(records)} of its {snapshot.n_records} records "
            f"(sha256 {snapshot.content_hash[:12]})")
    return records


def _distillation_records(ids, config: DistillPolicyJob) -> list[dict[str, Any]]:
    rows = StepRefinement.objects.filter(trajectory_id__in=ids, valid=True).select_related("critique")
    if config.only_changed:
        rows = rows.filter(changed=True)
    if config.skip_optimal:
        rows = rows.exclude(critique__verdict="optimal")
    newest = rows.newest_per_step()
    if not newest:
        raise ValueError("the selected trajectories have no valid refinements to distil"
                         + (" that change the action" if config.only_changed else "") + ": run a refine job first")
    index = sft_data.StepIndex(iter_records(Trajectory.objects.filter(pk__in={k[0] for k in newest})))
    return sft_data.distillation_records([from_json(r.record) for r in newest.values()], index)


def frozen_records(ctx: JobContext, config: TrainCriticJob) -> list[dict[str, Any]]:
    """The job's dataset, built on its first run and kept beside its log: a retry trains on the same records
    (and so resumes), even if other jobs wrote targets or critiques on these steps meanwhile."""
    path = Path(settings.NLAC_JOBS_DIR) / f"job-{ctx.job.pk}-records.jsonl"
    if path.is_file():
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        ctx.log(f"training on the {len(records)} records frozen by the first run")
        return records
    records = training_records(ctx, config)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{ctx.job.attempts}.part")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)
    return records


def run_train_critic(ctx: JobContext) -> dict[str, Any]:
    config: TrainCriticJob = ctx.config  # type: ignore[assignment]
    base = checkpoint_for(config.checkpoint)
    ctx.use_checkpoint(base)
    records = frozen_records(ctx, config)
    out = Path(settings.NLAC_TRAIN_DIR) / f"job-{ctx.job.pk}"
    role = {"distill-policy": "policy", "nlac": "policy+critic"}.get(
        ctx.job.kind if ctx.job.kind == "distill-policy" else config.source, "critic")
    default_name = f"{role}-job-{ctx.job.pk}"
    ctx.log(f"training the {role} on {len(records)} {config.source} records from {base.name} into {out}")

    def on_progress(event) -> None:
        ctx.progress(event.step, event.total_steps, "train")
        ctx.metric(step=event.step, loss=event.loss, tokens_per_s=round(event.tokens_per_s, 1), epoch=event.epoch)

    launch = training_launch(config.strategy)
    if launch.spawns:
        ctx.log(f"accelerate launch: {launch.processes} processes x {launch.machines} machine(s), {launch.strategy}")
    if launch.machines > 1:
        _log_join_command(ctx, launch, config, out, base.path, role)
    result = train(records, base.path, out, config.sft_config(), launch, parent_checkpoint=base.path,
                   name=config.name or default_name, on_progress=on_progress,
                   should_stop=ctx.should_stop, kind=role, stop_grace_s=settings.NLAC_TRAIN_STOP_GRACE_S)
    metrics = result.metrics
    if metrics.get("stopped_early"):
        ctx.log(f"stopped at step {metrics['steps']}/{metrics['total_steps']}; a retry resumes from there")
        return {"steps": metrics["steps"], "stopped_early": True}
    checkpoint = do_register_checkpoint(result.checkpoint_dir, name=config.name or default_name,
                                        kind=role, produced_by=ctx.job, parent=base)
    ctx.log(f"registered checkpoint {checkpoint.name} (train loss {metrics['train_loss']:.4f})")
    return {"checkpoint_produced": checkpoint.pk, "records": len(records), "steps": metrics["steps"],
            "train_loss": metrics["train_loss"], "tokens_per_s": metrics["tokens_per_s"]}


def _log_join_command(ctx: JobContext, launch, config: TrainCriticJob, out: Path, base: str, role: str) -> None:
    """A run over several hosts: this worker is machine 0; the job log says what each other host runs (the same
    records, settings and lineage, so that every machine plans the same run), on the shared storage."""
    settings_file = out / "sft-config.json"
    out.mkdir(parents=True, exist_ok=True)
    settings_file.write_text(json.dumps(config.sft_config().to_dict(), indent=2), encoding="utf-8")
    ctx.log(f"each other machine R (1..{launch.machines - 1}) joins with: python -m nlac_core train "
            f"{out}/.launch/machine-0/records.jsonl --out {out} --config {settings_file} --base-model {base} "
            f"--parent {base} --kind {role} --processes {launch.processes} --strategy {launch.strategy} "
            f"--machines {launch.machines} --machine-rank R --main-process-ip {launch.main_process_ip} "
            f"--main-process-port {launch.main_process_port}")
