"""evaluate-critic: a critic checkpoint against the held-out human verdicts of a critic-targets snapshot.

The items are the split's records whose target is a human correction (gold, or submitted when the snapshot
took those); the checkpoint critiques each of those steps (written as this job's StepCritiques, a chunk at a
time, so a re-run after a crash critiques only the rest), and the job's outputs are the scores:
verdict accuracy and confusion matrix, calibration of the predicted outcome against the episode's real
outcome (a reliability diagram, Brier score, ECE), and word similarity of the critique's free text
(future, reason, suggestion) to the human's.
"""

from __future__ import annotations

from typing import Any

from webapp.jobs import loaded_model
from webapp.jobs.configs import EvaluateCriticJob
from webapp.jobs.models import StepCritique
from webapp.jobs.runners.base import JobContext, write_in_chunks
from webapp.jobs.services.checkpoints import checkpoint_for

HUMAN = ("gold", "submitted")


def held_out(config: EvaluateCriticJob) -> list[Any]:
    """The split's human-judged records of the snapshot (whose trajectory still exists): all of them, or a
    seeded sample of ``max_steps`` spread over the whole split; in position order."""
    import random

    from webapp.datasets.models import SnapshotRecord

    rows = SnapshotRecord.objects.filter(snapshot_id=config.snapshot, split=config.split, source__in=HUMAN,
                                         trajectory__isnull=False)
    ids = list(rows.order_by("position").values_list("pk", flat=True))
    if len(ids) > config.max_steps:
        ids = random.Random(0).sample(ids, config.max_steps)
    return list(rows.filter(pk__in=ids).select_related("trajectory", "revision").order_by("position"))


def run_evaluate_critic(ctx: JobContext) -> dict[str, Any]:
    from nlac_core.critic import CritiqueConfig, critique
    from nlac_core.outputs import to_json
    from nlac_core.state import step_of
    from nlac_core.successor import transition_of
    from webapp.trajectories.models import Trajectory
    from webapp.trajectories.services.exports import iter_with_ids

    config: EvaluateCriticJob = ctx.config  # type: ignore[assignment]
    items = held_out(config)
    if not items:
        raise ValueError(f"the {config.split} split of snapshot {config.snapshot} has no human-judged steps")
    done = set(StepCritique.objects.filter(job=ctx.job).values_list("trajectory_id", "step_index"))
    todo = [r for r in items if (r.trajectory_id, r.step_index) not in done]
    total = len(items)
    ctx.log(f"{total} held-out human verdicts in the {config.split} split, {len(todo)} to critique")
    ctx.progress(total - len(todo), total, "critique")
    checkpoint = checkpoint_for(config.checkpoint) if config.backend != "openai" else None
    ctx.use_checkpoint(checkpoint)
    if todo:
        backend = loaded_model.backend_for(config, checkpoint)
        core = CritiqueConfig(k=1, mode=config.mode, temperature=0.0, chunk_size=config.chunk_size,
                              calibrate_verdicts=config.calibrate_verdicts)
        trajectories = dict(iter_with_ids(Trajectory.objects.filter(pk__in={r.trajectory_id for r in todo})))

        def make_rows(chunk):
            transitions = [transition_of(step_of(trajectories[r.trajectory_id], r.step_index), None,
                                         config.max_state_chars) for r in chunk]
            return [StepCritique(trajectory_id=r.trajectory_id, step_index=r.step_index, job=ctx.job,
                                 checkpoint=checkpoint, verdict=c.verdict or "", success_prob=c.success_prob,
                                 parse_ok=c.parse_ok, mode=c.mode, prompt_id=c.provenance.prompt_id, record=to_json(c))
                    for r, c in zip(chunk, critique(backend, transitions, core), strict=True)]

        write_in_chunks(ctx, todo, total, config.chunk_size, make_rows, "critiqued")
        if ctx.should_stop():
            return {"evaluated": 0}
    return scores(ctx.job, items) | {"checkpoint": checkpoint.pk if checkpoint else None,
                                     "snapshot": config.snapshot, "split": config.split}


def scores(job, items) -> dict[str, Any]:
    from nlac_core.metrics import calibration, text_similarity, verdict_scores
    from nlac_core.outcome import Scored, outcome_report
    from nlac_core.outputs import from_json
    from webapp.annotation.models import VERDICTS

    critiques = {(c.trajectory_id, c.step_index): c for c in StepCritique.objects.filter(job=job)}
    verdicts, outcomes, similarities, scored = [], [], [], []
    for r in items:
        c = critiques.get((r.trajectory_id, r.step_index))
        if c is None:
            continue
        gold = (r.data.get("provenance") or {}).get("verdict", "")
        if gold:
            verdicts.append((gold, c.verdict))
        outcomes.append((c.success_prob, r.trajectory.success))
        if c.success_prob is not None:
            scored.append(Scored(str(r.trajectory.task_id), c.success_prob, r.trajectory.success))  # by task
        # the free text only: the section headers, verdict and outcome would inflate the score
        model = from_json(c.record)
        said = " ".join((model.predicted_future, model.reasoning, model.suggestion))
        if r.revision is not None:
            gold_text = " ".join((r.revision.predicted_future, r.revision.reasoning, r.revision.suggestion))
        else:
            gold_text = r.data["completion"][0]["content"]
        similarities.append(text_similarity(said, gold_text))
    return {"evaluated": len(similarities), "verdict": verdict_scores(verdicts, VERDICTS),
            "calibration": calibration(outcomes),
            # P(success) on won vs lost episodes' steps: AUROC with a by-task interval, the base rate's Brier, and
            # flags for a successor that says "success" everywhere (nlac_core.outcome)
            "outcome": {k: v for k, v in outcome_report(scored).items() if k != "bins"},
            "similarity": sum(similarities) / len(similarities) if similarities else None,
            "parse_rate": sum(c.parse_ok for c in critiques.values()) / len(critiques) if critiques else None}
