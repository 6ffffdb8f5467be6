"""backup: language Bellman targets for the selected steps, one committed chunk at a time.

a_t+1 comes from the policy checkpoint (or the recorded next action), d_t+1
from the target network: ``target_checkpoint``, else the policy checkpoint's
EMA twin, else the policy checkpoint itself. Like critiques, a re-run writes
only the steps this job has not written yet.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nlac_core.bellman import BackupConfig, backup
from nlac_core.outputs import to_json
from webapp.jobs import loaded_model
from webapp.jobs.configs import BackupJob
from webapp.jobs.models import Checkpoint, StepTarget
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.critique import selected_steps
from webapp.jobs.runners.shards import chunk_seed, fan_out, outputs_with_shards
from webapp.jobs.runners.steps import output_jobs, steps_to_do, write_in_chunks


def target_network(config: BackupJob, policy: Checkpoint) -> Checkpoint:
    if config.target_checkpoint is not None:
        return Checkpoint.objects.get(pk=config.target_checkpoint)
    return Checkpoint.objects.filter(ema_of=policy).first() or policy


def run_backup(ctx: JobContext) -> dict[str, Any]:
    config: BackupJob = ctx.config  # type: ignore[assignment]
    policy_checkpoint = ctx.model_checkpoint(config)
    target_checkpoint = target_network(config, policy_checkpoint)
    items = selected_steps(ctx, config)
    if (stopped := fan_out(ctx, len(items), target_checkpoint=target_checkpoint.pk)) is not None:
        return stopped
    work = steps_to_do(ctx, StepTarget, items, "backup", "backed up")
    ctx.log(f"policy {policy_checkpoint.name}, target network {target_checkpoint.name}")
    if work.todo:
        policy = loaded_model.backend_for(config, policy_checkpoint)
        separate = target_checkpoint.pk != policy_checkpoint.pk
        target = loaded_model.extra_backend(config, target_checkpoint) if separate else policy
        core = BackupConfig(next_action=config.next_action, temperature=config.temperature, seed=config.seed,
                            max_state_chars=config.max_state_chars, chunk_size=config.chunk_size)

        def make_rows(chunk, start):
            targets = backup(policy, target, [step for _, step in chunk],
                             replace(core, seed=chunk_seed(config.seed, start)))
            return [StepTarget(trajectory_id=tid, step_index=step.index, job=ctx.job, checkpoint=policy_checkpoint,
                               target_checkpoint=target_checkpoint, terminal=t.terminal,
                               success_prob=t.success_prob, prompt_id=t.provenance.prompt_id, record=to_json(t))
                    for (tid, step), t in zip(chunk, targets, strict=True)]

        try:
            write_in_chunks(ctx, work, config.chunk_size, make_rows, "wrote targets for")
        finally:
            if separate and hasattr(target, "close"):
                target.close()
    rows = StepTarget.objects.filter(job__in=output_jobs(ctx))
    return outputs_with_shards(ctx, {"targets": rows.count(), "terminal": rows.filter(terminal=True).count(),
                                     "steps": work.total, "checkpoint": policy_checkpoint.pk,
                                     "target_checkpoint": target_checkpoint.pk})
