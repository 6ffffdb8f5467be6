"""evaluate-critic: a critic checkpoint against the held-out reference labels of a snapshot, beside its base.

The items are the split's records whose label is a reference: a human correction (gold, or submitted when the
snapshot took those) of a critic-targets or runtime-critic snapshot, and in a runtime-critic snapshot also the
first-error labels placed by gold actions (source "label"). The checkpoint judges each of those steps, written
as this job's StepCritiques a chunk at a time (a re-run after a crash judges only the rest):

- critic targets: the full critique (futures, sectioned verdict), as a critique job writes it;
- runtime critic: P(approve) / P(intervene) on the record's own prompt, which is the prompt the runtime critic
  sees (``nlac_core.supervision.decision_probs``).

The scores (``nlac_core.critic_eval``): AUROC of P(not optimal / intervene), balanced accuracy, false-alarm rate
and recall, each with a bootstrap 95% interval by task, Brier score against the base rate, positivity, the
majority class, and the same figures for the **base checkpoint** (the root of the checkpoint's lineage) on the
same items: taken from an earlier evaluation of the base with the same settings, or judged here. Critic targets
also get verdict accuracy and the confusion matrix, the calibration of the predicted outcome against the
episodes' real outcomes, and word similarity of the critique's free text to the human's.
"""

from __future__ import annotations

import random
from typing import Any

from nlac_core.actions import render_message_action
from nlac_core.backends.base import ChatRequest, Provenance, SamplingSpec
from nlac_core.critic import CritiqueConfig, critique
from nlac_core.critic_eval import Judged, critic_report, is_flag, p_flag_of_verdicts
from nlac_core.metrics import calibration, text_similarity, verdict_scores
from nlac_core.outcome import Scored, outcome_report
from nlac_core.outputs import from_json, to_json
from nlac_core.prompts.nlac import DECISIONS, RUNTIME_CRITIC, VERDICTS
from nlac_core.state import step_of
from nlac_core.successor import ref_of, transition_of
from nlac_core.supervision import as_critique, decision_probs
from webapp.datasets.models import Snapshot, SnapshotRecord
from webapp.jobs import loaded_model
from webapp.jobs.configs import EvaluateCriticJob
from webapp.jobs.models import Checkpoint, Job, StepCritique
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.steps import StepWork, write_in_chunks
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_with_ids

HUMAN = ("gold", "submitted")
REFERENCE = {"critic_targets": HUMAN, "runtime_critic": (*HUMAN, "label")}


def snapshot_kind(config: EvaluateCriticJob) -> str:
    snapshot = Snapshot.objects.select_related("dataset").filter(pk=config.snapshot).first()
    if snapshot is None:
        raise ValueError(f"snapshot {config.snapshot} does not exist")
    if snapshot.dataset.kind not in REFERENCE:
        raise ValueError(f"snapshot {config.snapshot} is a {snapshot.dataset.kind} snapshot; a critic is evaluated "
                         "on critic targets or runtime-critic data")
    return snapshot.dataset.kind


def held_out(config: EvaluateCriticJob, kind: str = "critic_targets") -> list[Any]:
    """The split's reference-labelled records of the snapshot (whose trajectory still exists), one per step:
    all of them, or a seeded sample of ``max_steps`` spread over the whole split; in position order."""
    rows = SnapshotRecord.objects.filter(snapshot_id=config.snapshot, split=config.split,
                                         source__in=REFERENCE[kind], trajectory__isnull=False)
    first: dict[tuple[int, int], int] = {}
    for pk, tid, index in rows.order_by("position").values_list("pk", "trajectory_id", "step_index"):
        first.setdefault((tid, index), pk)
    ids = list(first.values())
    if len(ids) > config.max_steps:
        ids = random.Random(0).sample(ids, config.max_steps)
    return list(rows.filter(pk__in=ids).select_related("trajectory", "revision").order_by("position"))


def base_of(checkpoint: Checkpoint | None) -> Checkpoint | None:
    """The root of a checkpoint's lineage (the model it was trained from), or None for a root itself."""
    if checkpoint is None or checkpoint.parent_id is None:
        return None
    seen = {checkpoint.pk}
    node = checkpoint
    while node.parent_id is not None and node.parent_id not in seen:
        seen.add(node.parent_id)
        node = node.parent
    return node


def run_evaluate_critic(ctx: JobContext) -> dict[str, Any]:
    config: EvaluateCriticJob = ctx.config  # type: ignore[assignment]
    kind = snapshot_kind(config)
    items = held_out(config, kind)
    if not items:
        raise ValueError(f"the {config.split} split of snapshot {config.snapshot} has no reference-labelled steps")
    done = set(StepCritique.objects.filter(job=ctx.job).values_list("trajectory_id", "step_index"))
    work = StepWork(items, range(len(items)),
                    {i for i, r in enumerate(items) if (r.trajectory_id, r.step_index) not in done})
    todo, total = work.todo, work.total
    ctx.log(f"{total} held-out reference labels in the {config.split} split ({kind}), {len(todo)} to judge")
    ctx.progress(total - len(todo), total, "judge")
    checkpoint = ctx.model_checkpoint(config)
    if todo:
        backend = loaded_model.backend_for(config, checkpoint)
        make_rows = _judge_rows(ctx.job, config, kind, checkpoint, backend)
        write_in_chunks(ctx, work, config.chunk_size, lambda chunk, start: make_rows(chunk), "judged")
        if ctx.should_stop():
            return {"evaluated": 0}
    out = scores(ctx.job, items, kind) | {"checkpoint": checkpoint.pk if checkpoint else None,
                                          "snapshot": config.snapshot, "split": config.split, "kind": kind}
    out["base"] = _base_scores(ctx, config, kind, checkpoint, items) if config.compare_base else None
    return out


def _judge_rows(job: Job, config: EvaluateCriticJob, kind: str, checkpoint: Checkpoint | None, backend):
    """A function from a chunk of snapshot records to the (unsaved) StepCritiques of ``backend``'s judgments."""
    def make_rows(chunk):
        return [StepCritique(trajectory_id=r.trajectory_id, step_index=r.step_index, job=job, checkpoint=checkpoint,
                             verdict=c.verdict or "", success_prob=c.success_prob, parse_ok=c.parse_ok, mode=c.mode,
                             prompt_id=c.provenance.prompt_id, record=to_json(c))
                for r, c in zip(chunk, judge(backend, config, kind, chunk), strict=True)]

    return make_rows


def judge(backend, config: EvaluateCriticJob, kind: str, chunk) -> list[Any]:
    """The critic's Critique of each snapshot record's step (see the module docstring)."""
    trajectories = dict(iter_with_ids(Trajectory.objects.filter(pk__in={r.trajectory_id for r in chunk})))
    steps = [step_of(trajectories[r.trajectory_id], r.step_index) for r in chunk]
    if kind == "runtime_critic":
        requests = [ChatRequest(list(r.data["prompt"])) for r in chunk]
        spec = SamplingSpec(max_new_tokens=8)  # what choose() writes with a backend without likelihoods
        probs = decision_probs(backend, requests, config.calibrate_verdicts, spec)
        provenance = Provenance.of(RUNTIME_CRITIC.prompt_id, backend, spec)
        calibration = "content_free" if config.calibrate_verdicts else ""
        return [as_critique(ref_of(s), {"round": 0, "proposal": _judged_action(s, r), "executed": False,
                                        "decision": max(p, key=p.get) if p else "approve", "decision_probs": p,
                                        "calibration": calibration}, provenance)
                for s, r, p in zip(steps, chunk, probs, strict=True)]
    core = CritiqueConfig(k=1, mode=config.mode, temperature=0.0, chunk_size=config.chunk_size,
                          calibrate_verdicts=config.calibrate_verdicts)
    return critique(backend, [transition_of(s, None, config.max_state_chars) for s in steps], core)


def _judged_action(step, record) -> str:
    """The proposal a runtime-critic record asks about: a rejected proposal its label names, else the step's
    recorded action."""
    return str((record.data.get("provenance") or {}).get("action") or render_message_action(step.action))


def _base_scores(ctx: JobContext, config: EvaluateCriticJob, kind: str, checkpoint: Checkpoint | None,
                 items) -> dict[str, Any] | None:
    """The base checkpoint's figures on the same items: from the newest succeeded evaluation of the base with the
    same settings when it judged every item, else judged now (kept in memory: the base's own evaluate-critic
    job is where its critiques are stored)."""
    base = base_of(checkpoint)
    if base is None:
        return {"checkpoint": None, "skipped": "this checkpoint is a base model (it has no parent)"}
    same = {k: v for k, v in ctx.job.config.items() if k not in ("checkpoint", "compare_base", "batch_size")}
    earlier = Job.objects.filter(kind="evaluate-critic", status=Job.SUCCEEDED, checkpoint=base).order_by("-id")
    keys = {(r.trajectory_id, r.step_index) for r in items}
    for job in earlier[:20]:
        if {k: v for k, v in job.config.items() if k in same} != same:
            continue
        rows = {(c.trajectory_id, c.step_index): c for c in StepCritique.objects.filter(job=job)}
        if keys <= set(rows):
            report = judged_report(items, rows, kind)
            return {"checkpoint": base.pk, "name": base.name, "from_job": job.pk, **report}
    ctx.log(f"judging the same {len(items)} steps with the base checkpoint {base.name}")
    backend = loaded_model.extra_backend(config, base)
    try:
        rows = {}
        for start in range(0, len(items), config.chunk_size):
            if ctx.should_stop():
                return None
            chunk = items[start:start + config.chunk_size]
            made = _judge_rows(ctx.job, config, kind, base, backend)(chunk)
            rows.update({(c.trajectory_id, c.step_index): c for c in made})
            ctx.progress(start + len(chunk), len(items), "base")
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    return {"checkpoint": base.pk, "name": base.name, "from_job": None, **judged_report(items, rows, kind)}


def reference_flag(record, kind: str) -> bool | None:
    """The reference label of a snapshot record: True for not optimal / intervene; None without one."""
    provenance = record.data.get("provenance") or {}
    if kind == "runtime_critic":
        decision = provenance.get("decision", "")
        return None if decision not in ("approve", "intervene") else decision == "intervene"
    verdict = provenance.get("verdict", "")
    return is_flag(verdict) if verdict else None


def judged_items(items, critiques: dict, kind: str) -> list[Any]:
    """``critic_eval.Judged`` of every item with a reference label and a critique; by task (the snapshot's task
    key), so the intervals resample whole tasks."""
    out = []
    for r in items:
        c = critiques.get((r.trajectory_id, r.step_index))
        label = reference_flag(r, kind)
        if c is None or label is None:
            continue
        model = from_json(c.record)
        out.append(Judged(r.task_key, p_flag_of_verdicts(model.verdict_probs), is_flag(model.decision or c.verdict),
                          label))
    return out


def judged_report(items, critiques: dict, kind: str) -> dict[str, Any]:
    return critic_report(judged_items(items, critiques, kind))


def scores(job, items, kind: str = "critic_targets") -> dict[str, Any]:
    """The job's figures: ``critic`` (``nlac_core.critic_eval``) for either kind; for critic targets also verdict
    accuracy, the predicted outcome's calibration and AUROC, and the critique text's similarity to the human's."""
    critiques = {(c.trajectory_id, c.step_index): c for c in StepCritique.objects.filter(job=job)}
    report = judged_report(items, critiques, kind)
    parse_rate = sum(c.parse_ok for c in critiques.values()) / len(critiques) if critiques else None
    if kind == "runtime_critic":
        pairs = [((r.data.get("provenance") or {}).get("decision", ""), critiques[key].record.get("decision", ""))
                 for r in items if (key := (r.trajectory_id, r.step_index)) in critiques]
        return {"evaluated": len(pairs), "critic": report, "verdict": verdict_scores(pairs, DECISIONS),
                "parse_rate": parse_rate}
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
            scored.append(Scored(r.task_key, c.success_prob, r.trajectory.success))  # by task
        # the free text only: the section headers, verdict and outcome would inflate the score
        model = from_json(c.record)
        said = " ".join((model.predicted_future, model.reasoning, model.suggestion))
        if r.revision is not None:
            gold_text = " ".join((r.revision.predicted_future, r.revision.reasoning, r.revision.suggestion))
        else:
            gold_text = r.data["completion"][0]["content"]
        similarities.append(text_similarity(said, gold_text))
    return {"evaluated": len(similarities), "critic": report, "verdict": verdict_scores(verdicts, VERDICTS),
            "calibration": calibration(outcomes),
            # P(success) on won vs lost episodes' steps: AUROC with a by-task interval, the base rate's Brier, and
            # flags for a successor that says "success" everywhere (nlac_core.outcome)
            "outcome": {k: v for k, v in outcome_report(scored).items() if k != "bins"},
            "similarity": sum(similarities) / len(similarities) if similarities else None,
            "parse_rate": parse_rate}
