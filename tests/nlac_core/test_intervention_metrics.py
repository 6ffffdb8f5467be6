"""The critic's measures on hand-built cases whose answers are known."""

from __future__ import annotations

from dataclasses import dataclass, field

from nlac_core.intervention_metrics import Counterfactual, arms, helpfulness, intervention_rate


@dataclass
class T:
    meta: dict = field(default_factory=dict)


def test_it_counts_interventions_per_check_and_per_episode():
    out = intervention_rate([T({"supervision": {"checks": 6, "interventions": 3}}),
                             T({"supervision": {"checks": 4, "interventions": 0}}), T({})])
    assert out == {"episodes": 2, "checks": 10, "interventions": 3, "rate": 0.3, "per_episode": 1.5}
    assert intervention_rate([])["rate"] is None


def test_it_measures_helpfulness_and_harmfulness_from_counterfactuals():
    cases = ([Counterfactual(True, success_with=True, success_without=False)] * 3      # saved 3 of 4 would-fail
             + [Counterfactual(True, success_with=False, success_without=False)]
             + [Counterfactual(True, success_with=False, success_without=True)]        # broke 1 of 5 would-succeed
             + [Counterfactual(False, success_with=True, success_without=True)] * 4)
    out = helpfulness(cases)
    assert out["helpfulness"] == 0.75 and out["harmfulness"] == 0.2
    assert out["would_fail"] == 4 and out["would_succeed"] == 5 and out["n"] == 9
    assert helpfulness([])["helpfulness"] is None


def test_it_computes_recovery_disruption_and_the_break_even_rate():
    # 10 paired tasks: the baseline fails 4; the critic recovers 2 of them (r = 0.5) and breaks 1 of the 6
    # successes (d = 1/6): break-even p* = d / (r + d) = 0.25 < p = 0.4, so intervening pays.
    baseline = {(str(i), 0): i >= 4 for i in range(10)}
    supervised = {**baseline, ("0", 0): True, ("1", 0): True, ("9", 0): False, ("extra", 0): True}
    out = arms(baseline, supervised)
    assert out["pairs"] == 10 and out["recovery"] == 0.5 and abs(out["disruption"] - 1 / 6) < 1e-12
    assert abs(out["break_even"] - 0.25) < 1e-12 and out["baseline_failure_rate"] == 0.4
    assert out["intervening_pays"] is True and out["success_without"] == 0.6 and out["success_with"] == 0.7
    harmful = arms({("a", 0): False, ("b", 0): True}, {("a", 0): False, ("b", 0): False})
    assert harmful["recovery"] == 0.0 and harmful["disruption"] == 1.0 and harmful["intervening_pays"] is False
