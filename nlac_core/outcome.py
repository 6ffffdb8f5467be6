"""An honest predicted outcome: the successor's P(success) calibrated on real steps, and measured.

By log-likelihood the small successor says "success" about everywhere (P(success) near 0.9 on steps of lost
episodes as well as won ones), so its raw probability is neither a probability nor, often, a ranking. Two
things are kept apart:

- **calibration** (``OutcomeCalibration``): Platt scaling, p' = sigmoid(a * logit(p) + b), fitted by logistic
  regression (scikit-learn) on steps whose episode outcome is known. It makes the average prediction match the
  success rate and cannot create ranking power that is not there (it is monotone). Every calibrated future keeps
  its raw probability and the calibration's id.
- **evaluation** (``outcome_report``): on held-out steps, the mean prediction against the success rate, AUROC of
  won vs lost episodes' steps with a bootstrap 95% interval resampled by task, Brier score against the base rate's,
  a reliability diagram, and flags for a predictor that says "success" everywhere or cannot rank at all.

Steps, not episodes, are the items; a step's label is whether its episode succeeded. Splits and bootstrap
resamples go by task, since the steps of one task are not independent.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nlac_core.metrics import calibration

EPS = 1e-6
SAYS_SUCCESS_SHARE = 0.9  # flag: at least this share of steps predicted "success" ...
SAYS_SUCCESS_GAP = 0.2  # ... while the success rate is this much lower


@dataclass(frozen=True)
class Scored:
    """One step's predicted P(success) and its episode's outcome, with the task it belongs to."""

    task: str
    prob: float
    success: bool


@dataclass(frozen=True)
class OutcomeCalibration:
    """Platt scaling of P(success), fitted on ``n`` steps (``positives`` of won episodes)."""

    a: float
    b: float
    n: int
    positives: int
    fitted_on: str = ""  # what the steps were (a file, a project, a split)
    model: str = ""  # the successor it was fitted for
    prompt_id: str = ""

    @property
    def id(self) -> str:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]
        return f"platt@{digest}"

    def apply(self, prob: float | None) -> float | None:
        if prob is None:
            return None
        z = self.a * _logit(prob) + self.b
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "platt", "id": self.id, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutcomeCalibration:
        if not isinstance(data, dict) or data.get("kind") != "platt":
            raise ValueError("not an outcome calibration (expected an object with \"kind\": \"platt\")")
        try:
            return cls(a=float(data["a"]), b=float(data["b"]), n=int(data["n"]), positives=int(data["positives"]),
                       fitted_on=str(data.get("fitted_on", "")), model=str(data.get("model", "")),
                       prompt_id=str(data.get("prompt_id", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"outcome calibration: missing or bad field ({exc})") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> OutcomeCalibration:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable calibration file ({exc})") from None
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def fit_platt(items: Sequence[Scored], fitted_on: str = "", model: str = "", prompt_id: str = "",
              ) -> OutcomeCalibration:
    """Logistic regression of the outcome on logit(P(success)); both outcomes must be present."""
    from sklearn.linear_model import LogisticRegression  # lazy: scikit-learn only for a calibration fit

    positives = sum(i.success for i in items)
    if not items or positives in (0, len(items)):
        raise ValueError(f"calibration needs steps of won and of lost episodes; got {positives} won of {len(items)}")
    x = [[_logit(i.prob)] for i in items]
    y = [int(i.success) for i in items]
    fit = LogisticRegression(C=1e6, max_iter=1000).fit(x, y)  # (almost) unregularised: a two-parameter map
    return OutcomeCalibration(float(fit.coef_[0][0]), float(fit.intercept_[0]), len(items), positives,
                              fitted_on, model, prompt_id)


def auroc(items: Sequence[Scored]) -> float | None:
    """Area under the ROC curve of P(success) for won against lost episodes' steps (the Mann-Whitney U over
    average ranks, ties counted half, as ``sklearn.metrics.roc_auc_score``; computed here because the bootstrap
    calls it a thousand times); None with one class."""
    ordered = sorted(items, key=lambda i: i.prob)
    positives = sum(i.success for i in ordered)
    negatives = len(ordered) - positives
    if not positives or not negatives:
        return None
    rank_sum, start = 0.0, 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1].prob == ordered[start].prob:
            end += 1
        average_rank = (start + end) / 2 + 1
        rank_sum += average_rank * sum(i.success for i in ordered[start:end + 1])
        start = end + 1
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def bootstrap_by_task(items: Sequence[Scored], statistic: Callable[[Sequence[Scored]], float | None],
                      resamples: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float] | None:
    """A percentile interval of ``statistic``, resampling whole tasks with replacement; None when fewer than
    two tasks, or too few resamples where the statistic is defined."""
    by_task: dict[str, list[Scored]] = {}
    for item in items:
        by_task.setdefault(item.task, []).append(item)
    tasks = sorted(by_task)
    if len(tasks) < 2:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        sample = [i for t in (rng.choice(tasks) for _ in tasks) for i in by_task[t]]
        value = statistic(sample)
        if value is not None:
            values.append(value)
    if len(values) < resamples // 2:
        return None
    values.sort()
    lo = values[int((1 - level) / 2 * (len(values) - 1))]
    hi = values[int((1 + level) / 2 * (len(values) - 1))]
    return lo, hi


def outcome_report(items: Sequence[Scored], bins: int = 5, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """How good P(success) is on these steps (see the module docstring); figures that cannot be computed are
    None, never 0."""
    n = len(items)
    rate = sum(i.success for i in items) / n if n else None
    mean = sum(i.prob for i in items) / n if n else None
    said = sum(i.prob >= 0.5 for i in items) / n if n else None
    table = calibration([(i.prob, i.success) for i in items], bins)
    base_brier = sum((rate - i.success) ** 2 for i in items) / n if n else None
    value = auroc(items)
    interval = bootstrap_by_task(items, auroc, resamples, seed) if value is not None else None
    flags = []
    if said is not None and rate is not None and said >= SAYS_SUCCESS_SHARE and said - rate >= SAYS_SUCCESS_GAP:
        flags.append(f"says success everywhere: {said:.0%} of steps predicted success, {rate:.0%} of them succeeded")
    if value is None:
        flags.append("AUROC undefined: the steps come from episodes of one outcome only")
    elif interval is not None and interval[0] <= 0.5:
        flags.append(f"no evidence of ranking: the AUROC's 95% interval [{interval[0]:.2f}, {interval[1]:.2f}] "
                     "reaches 0.5")
    return {"n": n, "tasks": len({i.task for i in items}), "success_rate": rate, "mean_predicted": mean,
            "share_predicted_success": said, "auroc": value, "auroc_ci95": list(interval) if interval else None,
            "brier": table["brier"], "base_rate_brier": base_brier, "ece": table["ece"], "bins": table["bins"],
            "flags": flags}


def split_by_task(items: Sequence[Scored], held_out: float = 0.5, seed: int = 0) -> tuple[list[Scored],
                                                                                           list[Scored]]:
    """(fit, held-out) by a seeded hash of each task id: no task on both sides."""
    if not 0 < held_out < 1:
        raise ValueError(f"held_out must be between 0 and 1, got {held_out}")

    def side(task: str) -> bool:
        digest = hashlib.sha256(f"outcome-split:{seed}:{task}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2 ** 64 < held_out

    return [i for i in items if not side(i.task)], [i for i in items if side(i.task)]


def _logit(prob: float) -> float:
    p = min(max(float(prob), EPS), 1 - EPS)
    return math.log(p / (1 - p))
