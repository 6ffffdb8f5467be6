"""refine: refined actions for the selected steps that have a critique, one committed chunk at a time.

Each step is refined from its newest critique (or the critique ``critique_job`` wrote), for m rounds; a
round's text is checked against the step's action format (a tool call must name a known tool with JSON
arguments; a 20 Questions action must be a yes/no question). Only what the critique says to change is sent to
the model: a step judged optimal keeps its action (``refine_optimal`` rewrites it anyway) and the step that won
its episode always does; such a refinement is stored as the original action, marked kept. Steps without a
critique are counted and skipped. Like the other step jobs, a re-run writes only what is missing.
"""

from __future__ import annotations

import collections
from dataclasses import replace
from typing import Any

from django.db.models import Sum

from nlac_core.critic import CritiqueConfig
from nlac_core.outputs import from_json, to_json
from nlac_core.refine import RefineConfig, refine_steps
from nlac_core.state import pick_steps
from webapp.jobs import loaded_model
from webapp.jobs.configs import RefineJob
from webapp.jobs.models import StepCritique, StepRefinement
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.shards import chunk_seed, fan_out, outputs_with_shards
from webapp.jobs.runners.steps import output_jobs, steps_to_do, write_in_chunks
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_with_ids


def _critiques(ids, critique_job: int | None) -> dict[tuple[int, int], StepCritique]:
    rows = StepCritique.objects.filter(trajectory_id__in=ids)
    if critique_job is not None:
        rows = rows.filter(job_id=critique_job)
    return rows.newest_per_step()


def run_refine(ctx: JobContext) -> dict[str, Any]:
    config: RefineJob = ctx.config  # type: ignore[assignment]
    critiques = _critiques(ctx.selection.trajectory_ids, config.critique_job)
    items = []
    for tid, record in iter_with_ids(Trajectory.objects.filter(pk__in={k[0] for k in critiques})):
        items.extend((tid, step, critiques[(tid, step.index)]) for step in pick_steps([record])
                     if (tid, step.index) in critiques)
    if not items:
        raise ValueError("none of the selected steps has a critique: run a critique job on them first")
    if (stopped := fan_out(ctx, len(items))) is not None:
        return stopped
    work = steps_to_do(ctx, StepRefinement, items, "refine", "refined")
    ctx.log(f"refining the critiqued steps with {config.rounds} round(s)")
    checkpoint = ctx.model_checkpoint(config)
    backend = loaded_model.backend_for(config, checkpoint) if work.todo else None
    core = RefineConfig(rounds=config.rounds, temperature=config.temperature, seed=config.seed,
                        on_optimal="refine" if config.refine_optimal else "keep")

    def make_rows(chunk, start):
        refined = refine_steps(backend, [step for _, step, _ in chunk], [from_json(c.record) for _, _, c in chunk],
                               replace(core, seed=chunk_seed(config.seed, start)),
                               max_state_chars=config.max_state_chars, critique_config=CritiqueConfig())
        return [StepRefinement(trajectory_id=tid, step_index=step.index, job=ctx.job, critique=c,
                               checkpoint=checkpoint, valid=r.valid,
                               changed=r.refined_action.strip() != r.original_action.strip(),
                               prompt_id=r.provenance.prompt_id, record=to_json(r))
                for (tid, step, c), r in zip(chunk, refined, strict=True)]

    write_in_chunks(ctx, work, config.chunk_size, make_rows, "refined")
    rows = StepRefinement.objects.filter(job__in=output_jobs(ctx))
    kept = collections.Counter(r.get("kept") or "" for r in rows.values_list("record", flat=True))
    selected = Trajectory.objects.filter(pk__in=ctx.selection.trajectory_ids).aggregate(n=Sum("n_steps"))["n"]
    return outputs_with_shards(ctx, {
        "refinements": rows.count(), "valid": rows.filter(valid=True).count(),
        "changed": rows.filter(changed=True).count(), "steps": work.total,
        "refined": kept[""], "kept_optimal": kept["optimal"], "kept_won": kept["won"],
        "skipped_no_critique": max((selected or 0) - len(items), 0),
        "checkpoint": checkpoint.pk if checkpoint else None})
