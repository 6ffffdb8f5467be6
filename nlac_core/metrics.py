"""Episode metrics that do not need a model."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from math import comb


def pass_hat_k(outcomes: Iterable[tuple[int, int]], k: int) -> float | None:
    """tau-bench's pass^k: the mean over tasks of C(c, k) / C(n, k).

    ``outcomes`` is (n trials, c successes) per task. Tasks with fewer than k
    trials cannot say anything about k and are left out; None when none remain.
    """
    ratios = [comb(c, k) / comb(n, k) for n, c in outcomes if n >= k]
    return sum(ratios) / len(ratios) if ratios else None


def pass_hat_ks(outcomes: list[tuple[int, int]]) -> dict[int, float]:
    """pass^k for k = 1 .. the largest number of trials of any task."""
    max_n = max((n for n, _ in outcomes), default=0)
    out = {}
    for k in range(1, max_n + 1):
        value = pass_hat_k(outcomes, k)
        if value is not None:
            out[k] = value
    return out


# -- a critic against human judgments ------------------------------------------------------------------------

def text_similarity(a: str, b: str) -> float:
    """Share of words in common, order-aware (difflib ratio over words): 1.0 identical, 0.0 disjoint."""
    wa, wb = (text.split() for text in (a or "", b or ""))
    if not wa and not wb:
        return 1.0
    return difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).ratio()


def verdict_scores(pairs: Iterable[tuple[str, str]], labels: Iterable[str]) -> dict:
    """Accuracy and confusion matrix of (human verdict, critic verdict) pairs; a critic verdict outside
    ``labels`` (none, a parse failure) counts as wrong and is its own column "none"."""
    labels = list(labels)
    confusion = {g: {p: 0 for p in [*labels, "none"]} for g in labels}
    right = total = 0
    for gold, predicted in pairs:
        if gold not in confusion:
            continue
        column = predicted if predicted in labels else "none"
        confusion[gold][column] += 1
        total += 1
        right += gold == predicted
    return {"n": total, "accuracy": right / total if total else None, "confusion": confusion, "labels": labels}


def calibration(pairs: Iterable[tuple[float, bool]], bins: int = 5) -> dict:
    """Predicted P(success) against what happened: a reliability diagram (per equal-width bin: n, mean
    prediction, observed success rate), the Brier score and the expected calibration error."""
    rows = [(min(max(float(p), 0.0), 1.0), bool(y)) for p, y in pairs if p is not None]
    table = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(p, y) for p, y in rows if lo <= p < hi or (b == bins - 1 and p == 1.0)]
        table.append({"lo": lo, "hi": hi, "n": len(inside),
                      "mean_predicted": sum(p for p, _ in inside) / len(inside) if inside else None,
                      "observed": sum(y for _, y in inside) / len(inside) if inside else None})
    n = len(rows)
    brier = sum((p - y) ** 2 for p, y in rows) / n if n else None
    ece = (sum(r["n"] * abs(r["mean_predicted"] - r["observed"]) for r in table if r["n"]) / n) if n else None
    return {"n": n, "bins": table, "brier": brier, "ece": ece}
