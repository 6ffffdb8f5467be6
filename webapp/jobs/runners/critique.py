"""critique: successor + evaluator over the selected steps, one committed chunk at a time.

The items are (trajectory, step) pairs in a fixed order; those this job has
already written are skipped, so a re-run after a crash or a cancel writes only
the rest, and the unique constraint on (job, trajectory, step) makes a second
write of the same step impossible even if two runs overlapped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db.models import Count

from nlac_core.critic import CritiqueConfig, critique
from nlac_core.outcome import OutcomeCalibration
from nlac_core.outputs import to_json
from nlac_core.state import pick_steps
from nlac_core.successor import transition_of
from webapp.jobs import loaded_model
from webapp.jobs.configs import CritiqueJob
from webapp.jobs.models import StepCritique
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.shards import chunk_seed, fan_out, outputs_with_shards
from webapp.jobs.runners.steps import output_jobs, steps_to_do, write_in_chunks
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_with_ids


def selected_steps(ctx: JobContext, config: CritiqueJob) -> list[tuple[int, Any]]:
    """(trajectory id, StepView) for every selected step, in trajectory then step order."""
    out: list[tuple[int, Any]] = []
    rows = Trajectory.objects.filter(pk__in=ctx.selection.trajectory_ids)
    for trajectory_id, record in iter_with_ids(rows):
        for step in pick_steps([record], config.steps):
            out.append((trajectory_id, step))
            if len(out) >= config.max_steps:
                return out
    return out


def run_critique(ctx: JobContext) -> dict[str, Any]:
    config: CritiqueJob = ctx.config  # type: ignore[assignment]
    items = selected_steps(ctx, config)
    if (stopped := fan_out(ctx, len(items))) is not None:
        return stopped
    work = steps_to_do(ctx, StepCritique, items, "critique", "critiqued")
    checkpoint = ctx.model_checkpoint(config)
    calibration = stored_calibration(checkpoint) if config.calibrate_outcome else None
    if work.todo:
        backend = loaded_model.backend_for(config, checkpoint)
        if calibration is not None:
            ctx.log(f"P(success) through the checkpoint's outcome calibration {calibration.id} "
                    f"(fitted on {calibration.n} steps)")
        core = CritiqueConfig(k=config.k, mode=config.mode, temperature=config.temperature, seed=config.seed,
                              chunk_size=config.chunk_size, calibrate_verdicts=config.calibrate_verdicts,
                              outcome_calibration=calibration)

        def make_rows(chunk, start):
            transitions = [transition_of(step, None, config.max_state_chars) for _, step in chunk]
            critiques = critique(backend, transitions, replace(core, seed=chunk_seed(config.seed, start)))
            return [StepCritique(trajectory_id=tid, step_index=step.index, job=ctx.job, checkpoint=checkpoint,
                                 verdict=c.verdict or "", success_prob=c.success_prob, parse_ok=c.parse_ok,
                                 mode=c.mode, prompt_id=c.provenance.prompt_id, record=to_json(c))
                    for (tid, step), c in zip(chunk, critiques, strict=True)]

        write_in_chunks(ctx, work, config.chunk_size, make_rows, "critiqued")
    verdicts: dict[str, int] = {}
    rows = StepCritique.objects.filter(job__in=output_jobs(ctx))
    for row in rows.order_by().values("verdict").annotate(n=Count("id")):
        verdicts[row["verdict"] or "none"] = verdicts.get(row["verdict"] or "none", 0) + row["n"]
    return outputs_with_shards(ctx, {"critiques": sum(verdicts.values()), "steps": work.total, "verdicts": verdicts,
                                     "checkpoint": checkpoint.pk if checkpoint else None,
                                     "outcome_calibration": calibration.id if calibration else None})


def stored_calibration(checkpoint):
    """The outcome calibration a calibrate-outcome job stored on the checkpoint (None: none yet)."""
    data = (checkpoint.manifest or {}).get("outcome_calibration") if checkpoint is not None else None
    return OutcomeCalibration.from_dict(data) if data else None
