"""An honest predicted outcome: Platt calibration of P(success) fitted on steps of known outcome, and a report
that says what the probability is worth (AUROC with a by-task bootstrap interval, Brier against the base rate,
reliability) and flags a successor that says "success" everywhere."""

from __future__ import annotations

import random

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.critic import CritiqueConfig, critique
from nlac_core.outcome import (
    OutcomeCalibration,
    Scored,
    auroc,
    bootstrap_by_task,
    fit_platt,
    outcome_report,
    split_by_task,
)
from nlac_core.outputs import from_json, to_json
from nlac_core.successor import transition_of
from tests.nlac_core._steps import tau_steps


def overconfident(n_tasks=40, steps=4, seed=0):
    """A successor like SmolLM2's: P(success) about 0.9 everywhere, a little higher on won episodes' steps;
    40% of episodes won."""
    rng = random.Random(seed)
    out = []
    for t in range(n_tasks):
        won = t % 5 < 2
        for _ in range(steps):
            out.append(Scored(f"task-{t}", min(0.99, 0.86 + (0.05 if won else 0.0) + rng.uniform(-0.04, 0.04)), won))
    return out


def test_it_flags_a_successor_that_says_success_everywhere():
    report = outcome_report(overconfident())
    assert report["share_predicted_success"] == 1.0 and report["success_rate"] == pytest.approx(0.4)
    assert report["flags"][0] == "says success everywhere: 100% of steps predicted success, 40% of them succeeded"
    assert report["brier"] > report["base_rate_brier"]  # worse than always saying the base rate


def test_it_calibrates_on_one_half_of_the_tasks_so_the_other_half_averages_its_success_rate():
    items = overconfident(n_tasks=200)
    fit, held = split_by_task(items, 0.5, seed=0)
    assert not {i.task for i in fit} & {i.task for i in held} and len(fit) + len(held) == len(items)
    platt = fit_platt(fit)
    calibrated = [Scored(i.task, platt.apply(i.prob), i.success) for i in held]
    report, raw = outcome_report(calibrated), outcome_report(held)
    assert report["mean_predicted"] == pytest.approx(report["success_rate"], abs=0.05)
    assert report["brier"] < raw["brier"] and report["brier"] < report["base_rate_brier"]
    assert report["auroc"] == pytest.approx(raw["auroc"])  # monotone: ranking power is neither made nor lost
    assert not any(f.startswith("says success") for f in report["flags"])


def test_it_computes_auroc_with_an_interval_by_task_and_says_when_it_cannot():
    perfect = [Scored(f"t{i}", 0.9 if i % 2 else 0.1, bool(i % 2)) for i in range(20)]
    assert auroc(perfect) == 1.0 and bootstrap_by_task(perfect, auroc) == (1.0, 1.0)
    chance = [Scored(f"t{i // 2}", 0.5, bool(i % 2)) for i in range(40)]
    report = outcome_report(chance)
    assert report["auroc"] == 0.5 and report["auroc_ci95"] == [0.5, 0.5]
    assert "no evidence of ranking" in report["flags"][-1]
    one_class = [Scored("t", 0.7, True), Scored("u", 0.8, True)]
    report = outcome_report(one_class)
    assert report["auroc"] is None and report["auroc_ci95"] is None
    assert report["flags"] == ["AUROC undefined: the steps come from episodes of one outcome only"]
    assert outcome_report([])["success_rate"] is None and outcome_report([])["brier"] is None


def test_it_computes_the_same_auroc_as_scikit_learn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = random.Random(3)
    items = [Scored(f"t{i}", round(rng.random(), 1), rng.random() < 0.4) for i in range(300)]
    expected = roc_auc_score([int(i.success) for i in items], [i.prob for i in items])
    assert auroc(items) == pytest.approx(expected, abs=1e-12)


def test_it_resamples_whole_tasks():
    """Two tasks whose steps all agree: every resample takes one task or both, never a mix of their steps."""
    items = [Scored("a", 0.9, True)] * 5 + [Scored("b", 0.1, False)] * 5
    interval = bootstrap_by_task(items, lambda xs: sum(x.success for x in xs) / len(xs), resamples=200)
    assert interval == (0.0, 1.0)
    assert bootstrap_by_task(items[:5], auroc) is None  # one task: no interval


def test_it_refuses_to_fit_on_one_outcome_and_round_trips_through_a_file(tmp_path):
    with pytest.raises(ValueError, match="needs steps of won and of lost episodes; got 2 won of 2"):
        fit_platt([Scored("a", 0.9, True), Scored("b", 0.8, True)])
    platt = fit_platt(overconfident(), fitted_on="synthetic", model="m", prompt_id="successor@x")
    path = tmp_path / "calibration.json"
    platt.save(path)
    assert OutcomeCalibration.load(path) == platt and platt.id.startswith("platt@")
    path.write_text('{"kind": "isotonic"}')
    with pytest.raises(ValueError, match="calibration.json: not an outcome calibration"):
        OutcomeCalibration.load(path)


def test_it_stores_the_calibrated_probability_with_the_raw_one_on_each_future_and_critique():
    transitions = [transition_of(s) for s in tau_steps()[:3]]
    platt = OutcomeCalibration(a=1.0, b=-2.0, n=10, positives=4)
    backend = FakeBackend(responder=lambda r: " the user agrees.")
    raw = critique(backend, transitions)
    calibrated = critique(FakeBackend(responder=lambda r: " the user agrees."), transitions,
                          CritiqueConfig(outcome_calibration=platt))
    for before, after in zip(raw, calibrated, strict=True):
        future = after.futures[0]
        assert future.success_prob_raw == before.success_prob
        assert future.success_prob == pytest.approx(platt.apply(before.success_prob))
        assert after.success_prob == future.success_prob and future.outcome_calibration == platt.id
        assert from_json(to_json(after)).futures[0].outcome_calibration == platt.id
