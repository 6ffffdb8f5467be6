"""A critic judged against reference labels, with the baselines a reviewer asks for.

The critic's job is to flag steps: "not optimal" for an NLAC verdict (suboptimal or harmful), "intervene" for
the runtime critic. Each held-out step is a ``Judged`` item: the critic's probability of flagging it
(``p_flag``), the critic's own decision (``flagged``), and the reference label (a human verdict, or a
first-error label from gold actions). ``critic_report`` gives, on those items:

- **AUROC** of ``p_flag`` for flagged-by-reference against fine steps: ranking, whatever the threshold;
- **balanced accuracy** of the decision, (recall + specificity) / 2, which a constant critic cannot beat 0.5 on;
- **false-alarm rate**: the share of fine steps the critic flagged (for a runtime critic, the actions it would
  have blocked for nothing); **recall**: the share of flagged-by-reference steps it flagged;
- each with a bootstrap 95% interval resampled **by task** (the steps of one task are not independent);
- **Brier score** of ``p_flag`` against the **base-rate** predictor's (the reference's flag share everywhere),
  and a reliability diagram;
- **positivity**: the share of steps the critic judged optimal / approved (a critic that approves everything
  has positivity 1 and balanced accuracy 0.5, however high its accuracy);
- the **majority-class** baseline on the same items.

A figure that cannot be computed (one class only, no probabilities) is None, with the reason under
``undefined``; never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nlac_core.backends.base import ChatRequest
from nlac_core.metrics import calibration
from nlac_core.outcome import Scored, auroc, bootstrap_by_task
from nlac_core.supervision import decision_probs

FLAG_VERDICTS = ("suboptimal", "harmful")  # an NLAC verdict other than "optimal" flags the step


@dataclass(frozen=True)
class Judged:
    """One held-out step: the critic's P(flag) and decision, and the reference label."""

    task: str
    p_flag: float | None  # P(not optimal) or P(intervene); None when the critic gave no probability
    flagged: bool  # the critic's decision: not optimal / intervene
    label: bool  # the reference: not optimal / intervene


def p_flag_of_verdicts(probs: Mapping[str, float] | None) -> float | None:
    """P(not optimal) from an NLAC critique's verdict probabilities (or a runtime check's decision
    probabilities, where "intervene" is the flag)."""
    if not probs:
        return None
    if "intervene" in probs or "approve" in probs:
        return float(probs.get("intervene", 0.0))
    total = sum(float(v) for v in probs.values())
    return None if total <= 0 else sum(float(probs.get(v, 0.0)) for v in FLAG_VERDICTS) / total


def is_flag(verdict_or_decision: str) -> bool:
    return verdict_or_decision in (*FLAG_VERDICTS, "intervene")


def _ranked(items: Sequence[Judged]) -> list[Scored]:
    return [Scored(i.task, i.p_flag, i.label) for i in items if i.p_flag is not None]


def auroc_of(items: Sequence[Judged]) -> float | None:
    return auroc(_ranked(items))


def recall(items: Sequence[Judged]) -> float | None:
    positives = [i for i in items if i.label]
    return sum(i.flagged for i in positives) / len(positives) if positives else None


def false_alarm_rate(items: Sequence[Judged]) -> float | None:
    negatives = [i for i in items if not i.label]
    return sum(i.flagged for i in negatives) / len(negatives) if negatives else None


def balanced_accuracy(items: Sequence[Judged]) -> float | None:
    r, f = recall(items), false_alarm_rate(items)
    return None if r is None or f is None else (r + (1 - f)) / 2


def accuracy(items: Sequence[Judged]) -> float | None:
    return sum(i.flagged == i.label for i in items) / len(items) if items else None


def positivity(items: Sequence[Judged]) -> float | None:
    return sum(not i.flagged for i in items) / len(items) if items else None


def _with_interval(items: Sequence[Judged], statistic: Callable[[Sequence[Judged]], float | None],
                   resamples: int, seed: int) -> tuple[float | None, list[float] | None]:
    value = statistic(items)
    if value is None:
        return None, None
    interval = bootstrap_by_task(items, statistic, resamples, seed)  # type: ignore[arg-type]
    return value, list(interval) if interval else None


def majority_baseline(items: Sequence[Judged]) -> dict[str, Any]:
    """The constant critic that always answers the reference's commoner label (ties: not flagging)."""
    n = len(items)
    if not n:
        return {"label": None, "accuracy": None, "balanced_accuracy": None, "false_alarm_rate": None,
                "auroc": None, "positivity": None}
    flags = sum(i.label for i in items)
    says_flag = flags > n - flags
    both = 0 < flags < n
    return {"label": "flag" if says_flag else "fine", "accuracy": max(flags, n - flags) / n,
            "balanced_accuracy": 0.5 if both else None,
            "false_alarm_rate": (1.0 if says_flag else 0.0) if flags < n else None,
            "auroc": 0.5 if both else None, "positivity": 0.0 if says_flag else 1.0}


def critic_report(items: Sequence[Judged], bins: int = 5, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Every figure of the module docstring on these items (see there)."""
    n = len(items)
    positives = sum(i.label for i in items)
    prevalence = positives / n if n else None
    ranked = [i for i in items if i.p_flag is not None]
    value_auroc, ci_auroc = _with_interval(ranked, auroc_of, resamples, seed)
    value_bacc, ci_bacc = _with_interval(items, balanced_accuracy, resamples, seed)
    value_fa, ci_fa = _with_interval(items, false_alarm_rate, resamples, seed)
    value_recall, ci_recall = _with_interval(items, recall, resamples, seed)
    table = calibration([(i.p_flag, i.label) for i in ranked], bins)
    base_rate = sum(i.label for i in ranked) / len(ranked) if ranked else None
    base_brier = sum((base_rate - i.label) ** 2 for i in ranked) / len(ranked) if ranked else None
    undefined: dict[str, str] = {}
    if not n:
        undefined["all"] = "no held-out steps"
    elif positives in (0, n):
        one = "flagged (not optimal / intervene)" if positives else "fine (optimal / approve)"
        reason = f"every held-out step is labelled {one}: one class only"
        undefined.update(auroc=reason, balanced_accuracy=reason)
        undefined["false_alarm_rate" if positives else "recall"] = reason
    if n and not ranked:
        undefined.setdefault("auroc", "the critic gave no probabilities")
        undefined["brier"] = "the critic gave no probabilities"
    elif value_auroc is None and "auroc" not in undefined:
        undefined["auroc"] = "the steps with a probability are of one class only"
    if value_auroc is not None and ci_auroc is None:
        undefined["auroc_ci95"] = "fewer than two tasks, or too few resamples with both classes"
    return {"n": n, "tasks": len({i.task for i in items}), "positives": positives, "prevalence": prevalence,
            "with_probability": len(ranked),
            "auroc": value_auroc, "auroc_ci95": ci_auroc,
            "balanced_accuracy": value_bacc, "balanced_accuracy_ci95": ci_bacc,
            "false_alarm_rate": value_fa, "false_alarm_rate_ci95": ci_fa,
            "recall": value_recall, "recall_ci95": ci_recall,
            "accuracy": accuracy(items), "positivity": positivity(items),
            "brier": table["brier"], "base_rate_brier": base_brier, "ece": table["ece"], "bins": table["bins"],
            "majority": majority_baseline(items), "undefined": undefined}


def summary_lines(name: str, report: Mapping[str, Any]) -> list[str]:
    """A few lines for a terminal (the CLI and the bench scripts print them)."""
    def f(value, spec=".3f"):
        return "undefined" if value is None else format(value, spec)

    def ci(key):
        interval = report.get(f"{key}_ci95")
        return f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""

    m = report.get("majority") or {}
    lines = [f"{name}: n={report['n']} tasks={report['tasks']} flagged by reference={report['positives']} "
             f"({f(report['prevalence'], '.1%')})",
             f"  AUROC {f(report['auroc'])}{ci('auroc')}  balanced accuracy {f(report['balanced_accuracy'])}"
             f"{ci('balanced_accuracy')}  false alarms {f(report['false_alarm_rate'])}{ci('false_alarm_rate')}  "
             f"recall {f(report['recall'])}{ci('recall')}",
             f"  positivity {f(report['positivity'], '.1%')}  Brier {f(report['brier'])} (base rate "
             f"{f(report['base_rate_brier'])})  majority class '{m.get('label')}': accuracy {f(m.get('accuracy'))}"]
    for key, why in (report.get("undefined") or {}).items():
        lines.append(f"  {key} undefined: {why}")
    return lines


# -- runtime-critic records (a runtime-critic dataset's prompt/completion lines) --------------------------------

def runtime_label(record: Mapping[str, Any]) -> bool | None:
    """A runtime-critic record's reference: True for intervene, False for approve, None when it says neither
    (the provenance's decision, else the ``DECISION:`` line of the completion)."""
    decision = ((record.get("provenance") or {}) if isinstance(record.get("provenance"), dict) else {}).get("decision")
    if decision not in ("approve", "intervene"):
        completion = record.get("completion") or []
        text = completion[0].get("content", "") if completion and isinstance(completion[0], dict) else ""
        first = str(text).strip().splitlines()[0] if str(text).strip() else ""
        decision = first.removeprefix("DECISION:").strip() if first.startswith("DECISION:") else ""
    return None if decision not in ("approve", "intervene") else decision == "intervene"


def judge_runtime_records(critic, records: Sequence[Mapping[str, Any]], tasks: Sequence[str],
                          calibrate: bool = True) -> list[Judged]:
    """The runtime critic's P(intervene) on each record's own prompt (``supervision.decision_probs``, as the
    evaluate-critic job judges a runtime-critic snapshot), paired with the record's label; records without a
    label are left out."""
    keep = [(r, t, label) for r, t in zip(records, tasks, strict=True) if (label := runtime_label(r)) is not None]
    probs = decision_probs(critic, [ChatRequest(list(r["prompt"])) for r, _, _ in keep], calibrate)
    return [Judged(t, p_flag_of_verdicts(p), bool(p) and max(p, key=p.get) == "intervene", label)
            for (_, t, label), p in zip(keep, probs, strict=True)]
