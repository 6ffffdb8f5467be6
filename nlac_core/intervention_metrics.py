"""Measuring a runtime critic: how often it intervenes, and whether its interventions help or hurt.

- ``intervention_rate``: interventions per check, from supervised trajectories.
- Step level, where counterfactual labels exist (the episode re-run from the same prefix without the
  intervention, or with a forced one): **helpfulness** = share of would-fail cases the intervention turned
  into successes; **harmfulness** = share of would-succeed cases it turned into failures.
- Episode level, from the two arms of a run (the same tasks and seeds with and without the critic):
  **recovery** r = share of the baseline's failed episodes that succeed under the critic; **disruption**
  d = share of the baseline's successes that fail under it. Intervening pays off in expectation when the
  baseline failure rate p exceeds d / (r + d): the **break-even** check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def intervention_rate(trajectories: Iterable[Any]) -> dict[str, float | int | None]:
    """Checks, interventions and their ratio over supervised trajectories (``meta["supervision"]``)."""
    checks = interventions = episodes = 0
    for t in trajectories:
        s = (t.meta or {}).get("supervision")
        if not s:
            continue
        episodes += 1
        checks += int(s.get("checks", 0))
        interventions += int(s.get("interventions", 0))
    return {"episodes": episodes, "checks": checks, "interventions": interventions,
            "rate": interventions / checks if checks else None,
            "per_episode": interventions / episodes if episodes else None}


@dataclass(frozen=True)
class Counterfactual:
    """One step with a counterfactual label: the outcome as it happened, and with the other choice."""

    intervened: bool  # did the critic intervene (True) or approve (False, forced intervention in the re-run)
    success_with: bool  # the episode's outcome with the intervention
    success_without: bool  # ... without it


def helpfulness(cases: Iterable[Counterfactual]) -> dict[str, float | int | None]:
    cases = list(cases)
    would_fail = [c for c in cases if not c.success_without]
    would_succeed = [c for c in cases if c.success_without]
    return {"n": len(cases), "would_fail": len(would_fail), "would_succeed": len(would_succeed),
            "helpfulness": sum(c.success_with for c in would_fail) / len(would_fail) if would_fail else None,
            "harmfulness": sum(not c.success_with for c in would_succeed) / len(would_succeed)
            if would_succeed else None}


def arms(baseline: Mapping[tuple[str, int], bool], supervised: Mapping[tuple[str, int], bool]) -> dict[str, Any]:
    """Recovery, disruption and the break-even check from paired episodes keyed by (task, trial)."""
    pairs = [(baseline[k], supervised[k]) for k in baseline if k in supervised]
    failed = [s for b, s in pairs if not b]
    passed = [s for b, s in pairs if b]
    r = sum(failed) / len(failed) if failed else None
    d = sum(not s for s in passed) / len(passed) if passed else None
    p = len(failed) / len(pairs) if pairs else None
    threshold = d / (r + d) if r is not None and d is not None and (r + d) > 0 else None
    return {"pairs": len(pairs), "success_without": sum(b for b, _ in pairs) / len(pairs) if pairs else None,
            "success_with": sum(s for _, s in pairs) / len(pairs) if pairs else None,
            "recovery": r, "disruption": d, "baseline_failure_rate": p, "break_even": threshold,
            "intervening_pays": (p > threshold) if p is not None and threshold is not None else None}
