"""Runtime supervision in the database: the critic's checks as runtime critiques, and a run's summary.

A supervised episode keeps every check on its executed steps (``Message.meta["supervision"]``). Each check
that the critic decided (approve or intervene, not the unchecked last revisions) is also stored as a
``StepCritique`` of mode ``runtime``, one row per (job, step, round), so the step page shows it and annotators
correct it like any critique; their corrections feed the runtime critic dataset kind.

``run_summary`` measures a supervised-rollout job from what it stored: the intervention rate, success and
pass^k of each arm on the same tasks and seeds, recovery / disruption and the break-even check from the
paired episodes, and helpfulness / harmfulness from the counterfactual re-runs.
"""

from __future__ import annotations

from typing import Any

from nlac_core.backends.base import Provenance
from nlac_core.counterfactual import CounterfactualCase
from nlac_core.evaluation import compute_metrics
from nlac_core.intervention_metrics import arms, helpfulness, intervention_rate
from nlac_core.outputs import StepRef, to_json
from nlac_core.prompts.nlac import RUNTIME_CRITIC
from nlac_core.supervision import as_critique
from webapp.jobs.models import Checkpoint, Job, StepCritique
from webapp.trajectories.models import Message, Trajectory
from webapp.trajectories.services.exports import iter_records

ARMS = ("baseline", "supervised", "counterfactual")


def do_store_runtime_checks(job: Job, trajectory_ids: list[int], checkpoint: Checkpoint | None) -> int:
    """The decided checks of these supervised trajectories as runtime critiques (idempotent); how many rows."""
    rows = []
    messages = (Message.objects.filter(trajectory_id__in=trajectory_ids, role="assistant", meta__has_key="supervision")
                .select_related("trajectory__task").order_by("trajectory_id", "position"))
    for message in messages:
        trajectory = message.trajectory
        ref = StepRef(trajectory.content_hash, message.step_index, trajectory.task.external_id)
        for check in message.meta["supervision"]:
            if check.get("decision") not in ("approve", "intervene"):
                continue
            provenance = Provenance(prompt_id=check.get("critic_prompt_id") or RUNTIME_CRITIC.prompt_id,
                                    backend=(trajectory.meta.get("supervision") or {}).get("critic_backend", ""),
                                    model=check.get("critic_model", ""))
            critique = as_critique(ref, check, provenance)
            rows.append(StepCritique(trajectory=trajectory, step_index=message.step_index, job=job,
                                     checkpoint=checkpoint, verdict=critique.verdict, parse_ok=True, mode="runtime",
                                     round=critique.round, prompt_id=provenance.prompt_id, record=to_json(critique)))
    StepCritique.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    return len(rows)


def _arm(trajectory: Trajectory) -> str:
    return (trajectory.meta or {}).get("arm", "")


def run_summary(job: Job, env: str) -> dict[str, Any]:
    """What a supervised-rollout job measured, from the trajectories it stored (see the module docstring)."""
    stored = Trajectory.objects.filter(meta__job=job.pk).select_related("task").order_by("id")
    records = {arm: [] for arm in ARMS}
    for record in iter_records(stored):
        records.setdefault(record.meta.get("arm", ""), []).append(record)
    out: dict[str, Any] = {"episodes": {arm: len(records[arm]) for arm in ARMS}}
    for arm in ("baseline", "supervised"):
        if records[arm]:
            metrics = compute_metrics(records[arm], env)
            out[arm] = {"success_rate": metrics.success_rate, "mean_reward": metrics.mean_reward,
                        "pass_hat_k": {str(k): v for k, v in metrics.pass_hat_k.items()},
                        "mean_turns": metrics.mean_turns}
    out["interventions"] = intervention_rate(records["supervised"])
    key = lambda r: (r.task.external_id, r.trial)  # noqa: E731 - the pairing of the arms
    if records["baseline"] and records["supervised"]:
        out["arms"] = arms({key(r): r.success for r in records["baseline"]},
                           {key(r): r.success for r in records["supervised"]})
    by_hash = {r.content_hash(): r for r in records["supervised"]}
    labels = []
    for rerun in records["counterfactual"]:
        of = rerun.meta.get("counterfactual") or {}
        original = by_hash.get(of.get("of"))
        if original is not None:
            labels.append(CounterfactualCase(original, of["step_index"], of["kind"]).label(rerun))
    # pooled over both kinds (an intervention's effect, wherever it was made), and apart: the critic's own
    # interventions ("without" re-runs) and forced ones on steps it approved (what intervening there would do)
    out["counterfactual"] = {**helpfulness(labels),
                             "without": sum(1 for c in labels if c.intervened),
                             "forced": sum(1 for c in labels if not c.intervened),
                             "by_kind": {"intervened": helpfulness(c for c in labels if c.intervened),
                                         "forced": helpfulness(c for c in labels if not c.intervened)}}
    return out
