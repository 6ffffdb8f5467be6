"""Episode metrics that do not need a model."""

from __future__ import annotations

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
