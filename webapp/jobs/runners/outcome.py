"""calibrate-outcome: the checkpoint's P(success) fitted to the selected episodes' real outcomes, and reported.

The selected steps (of episodes with a reward) are split by a seeded hash of their task: the successor predicts
P(success) for every step (chunk by chunk, committed to the job's outputs so a resumed job does not predict them
again), a Platt scaling is fitted on the fit part, and the held-out part is reported raw and calibrated
(``nlac_core.outcome.outcome_report``). The calibration is stored on the checkpoint (``manifest
["outcome_calibration"]``): the checkpoint's later critique jobs map P(success) through it and say so.
"""

from __future__ import annotations

from typing import Any

from nlac_core.critic import CritiqueConfig
from nlac_core.evaluation import is_success
from nlac_core.outcome import Scored, fit_platt, outcome_report, split_by_task
from nlac_core.prompts.nlac import SUCCESSOR
from nlac_core.successor import predict_futures, transition_of
from webapp.jobs import loaded_model
from webapp.jobs.configs import CalibrateOutcomeJob
from webapp.jobs.models import Checkpoint
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.critique import selected_steps


def run_calibrate_outcome(ctx: JobContext) -> dict[str, Any]:
    config: CalibrateOutcomeJob = ctx.config  # type: ignore[assignment]
    items = [(tid, step) for tid, step in selected_steps(ctx, config) if step.trajectory.reward is not None]
    if not items:
        raise ValueError("none of the selected steps belongs to an episode with a reward")
    checkpoint = ctx.model_checkpoint(config)
    state = dict(ctx.job.outputs or {})
    probs: dict[str, float | None] = dict(state.get("predicted") or {})  # "trajectory:step" -> P(success)
    todo = [(tid, step) for tid, step in items if f"{tid}:{step.index}" not in probs]
    ctx.log(f"{len(items)} steps with known outcomes, {len(todo)} to predict")
    backend = loaded_model.backend_for(config, checkpoint) if todo else None
    spec = CritiqueConfig().spec(64)
    for start in range(0, len(todo), config.chunk_size):
        if ctx.should_stop():
            return {**state, "predicted": probs}
        chunk = todo[start:start + config.chunk_size]
        futures = predict_futures(backend, [transition_of(step, None, config.max_state_chars) for _, step in chunk],
                                  spec)
        probs.update({f"{tid}:{step.index}": f[0].success_prob for (tid, step), f in zip(chunk, futures,
                                                                                          strict=True)})
        state["predicted"] = probs
        ctx.outputs(**state)
        ctx.progress(len(items) - len(todo) + start + len(chunk), len(items), "predict")
    scored = [Scored(step.trajectory.task.external_id, probs[f"{tid}:{step.index}"], is_success(step.trajectory))
              for tid, step in items if probs.get(f"{tid}:{step.index}") is not None]
    fit, held = split_by_task(scored, config.held_out, config.seed)
    platt = fit_platt(fit, fitted_on=f"job {ctx.job.pk}: {len(fit)} steps of {len({i.task for i in fit})} tasks",
                      model=checkpoint.name, prompt_id=SUCCESSOR.prompt_id)
    raw = outcome_report(held, seed=config.seed)
    calibrated = outcome_report([Scored(i.task, platt.apply(i.prob), i.success) for i in held], seed=config.seed)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        manifest={**(checkpoint.manifest or {}), "outcome_calibration": {**platt.to_dict(), "job": ctx.job.pk}})
    ctx.log(f"calibration {platt.id} stored on {checkpoint.name}: raw AUROC {raw['auroc']}, calibrated mean "
            f"{calibrated['mean_predicted']} against a success rate of {calibrated['success_rate']}")
    return {"calibration": platt.to_dict(), "checkpoint": checkpoint.pk, "fit_steps": len(fit),
            "held_out": {"raw": raw, "calibrated": calibrated}}
