"""The critic's figures on hand-built cases whose answers are known: AUROC (ties counted half, as scikit-learn),
intervals that resample whole tasks, balanced accuracy, false alarms, positivity, the majority class and the
base rate's Brier score; figures that cannot be computed say so instead of reading 0."""

from __future__ import annotations

import json

import pytest

from nlac_core.critic_eval import (
    Judged,
    auroc_of,
    critic_report,
    majority_baseline,
    p_flag_of_verdicts,
    runtime_label,
)


def items(rows):
    """(task, p_flag, flagged, label) tuples as Judged items."""
    return [Judged(*row) for row in rows]


def test_it_computes_auroc_with_ties_as_scikit_learn_does():
    from sklearn.metrics import roc_auc_score

    judged = items([("a", 0.8, True, True), ("a", 0.4, False, True), ("b", 0.4, False, False),
                    ("b", 0.2, False, False), ("c", 0.9, True, False), ("c", 0.7, True, True)])
    # pairs (positive above negative): .8 > .4, .8 > .2, .8 < .9, .4 = .4 (half), .4 > .2, .4 < .9, .7 > .4, .7 > .2,
    # .7 < .9: 5.5 of 9
    assert auroc_of(judged) == pytest.approx(5.5 / 9)
    assert auroc_of(judged) == pytest.approx(roc_auc_score([i.label for i in judged], [i.p_flag for i in judged]))


def test_it_resamples_whole_tasks_so_identical_tasks_give_a_point_interval():
    # every task holds the same four steps: any resample of tasks has the AUROC of one task (3 of 4 pairs), while a
    # resample of single steps would vary
    one_task = [(0.8, True, True), (0.3, False, True), (0.5, True, False), (0.1, False, False)]
    judged = items([(f"t{k}", p, f, y) for k in range(6) for p, f, y in one_task])
    report = critic_report(judged)
    assert report["auroc"] == pytest.approx(0.75) and report["auroc_ci95"] == pytest.approx([0.75, 0.75])
    assert report["balanced_accuracy"] == pytest.approx(0.5) and report["balanced_accuracy_ci95"] == [0.5, 0.5]
    assert report["tasks"] == 6 and report["n"] == 24


def test_it_widens_the_interval_when_tasks_disagree():
    good = [(f"good{k}", p, p >= 0.5, y) for k in range(5) for p, y in ((0.9, True), (0.1, False))]
    bad = [(f"bad{k}", p, p >= 0.5, y) for k in range(5) for p, y in ((0.1, True), (0.9, False))]
    report = critic_report(items(good + bad))
    assert report["auroc"] == pytest.approx(0.5)
    low, high = report["auroc_ci95"]
    assert low < 0.35 and high > 0.65  # the tasks pull both ways: the interval says so


def test_it_counts_balanced_accuracy_false_alarms_recall_and_positivity():
    # 4 flagged by the reference (3 caught), 6 fine (2 false alarms)
    rows = [("t1", 0.9, True, True), ("t1", 0.8, True, True), ("t2", 0.7, True, True), ("t2", 0.2, False, True),
            ("t3", 0.6, True, False), ("t3", 0.55, True, False), ("t4", 0.3, False, False),
            ("t4", 0.2, False, False), ("t5", 0.1, False, False), ("t5", 0.1, False, False)]
    report = critic_report(items(rows))
    assert report["recall"] == pytest.approx(0.75) and report["false_alarm_rate"] == pytest.approx(2 / 6)
    assert report["balanced_accuracy"] == pytest.approx((0.75 + 4 / 6) / 2)
    assert report["accuracy"] == pytest.approx(7 / 10) and report["positivity"] == pytest.approx(5 / 10)
    assert report["prevalence"] == pytest.approx(0.4) and report["positives"] == 4
    assert report["base_rate_brier"] == pytest.approx(0.4 * 0.6)
    expected_brier = sum((p - y) ** 2 for _, p, _, y in rows) / len(rows)
    assert report["brier"] == pytest.approx(expected_brier)
    for key in ("auroc_ci95", "balanced_accuracy_ci95", "false_alarm_rate_ci95", "recall_ci95"):
        low, high = report[key]
        assert low <= report[key.removesuffix("_ci95")] <= high
    assert report["majority"] == {"label": "fine", "accuracy": 0.6, "balanced_accuracy": 0.5,
                                  "false_alarm_rate": 0.0, "auroc": 0.5, "positivity": 1.0}
    assert report["undefined"] == {}


def test_it_gives_a_constant_critic_half_balanced_accuracy_however_high_its_accuracy():
    rows = [(f"t{k}", 0.1, False, k == 0) for k in range(10)]  # approves everything; one step in ten is bad
    report = critic_report(items(rows))
    assert report["accuracy"] == pytest.approx(0.9) and report["balanced_accuracy"] == pytest.approx(0.5)
    assert report["positivity"] == 1.0 and report["false_alarm_rate"] == 0.0 and report["recall"] == 0.0
    assert report["auroc"] == pytest.approx(0.5)  # every score tied


def test_it_says_why_a_figure_is_undefined_instead_of_reporting_zero():
    only_fine = critic_report(items([("t1", 0.2, False, False), ("t2", 0.7, True, False)]))
    assert only_fine["auroc"] is None and only_fine["balanced_accuracy"] is None and only_fine["recall"] is None
    assert only_fine["false_alarm_rate"] == 0.5
    assert "one class only" in only_fine["undefined"]["auroc"] and "recall" in only_fine["undefined"]
    assert only_fine["majority"]["balanced_accuracy"] is None and only_fine["majority"]["accuracy"] == 1.0
    empty = critic_report([])
    assert empty["n"] == 0 and empty["auroc"] is None and empty["positivity"] is None
    assert empty["undefined"]["all"] == "no held-out steps" and majority_baseline([])["label"] is None
    no_probs = critic_report(items([("t1", None, True, True), ("t2", None, False, False)]))
    assert no_probs["auroc"] is None and no_probs["brier"] is None
    assert no_probs["undefined"]["brier"] == "the critic gave no probabilities"
    assert no_probs["balanced_accuracy"] == 1.0  # the decisions still count
    one_task = critic_report(items([("t1", 0.9, True, True), ("t1", 0.1, False, False)]))
    assert one_task["auroc"] == 1.0 and one_task["auroc_ci95"] is None and "auroc_ci95" in one_task["undefined"]


def test_it_reads_the_flag_probability_of_verdicts_and_decisions():
    assert p_flag_of_verdicts({"optimal": 0.2, "suboptimal": 0.5, "harmful": 0.3}) == pytest.approx(0.8)
    assert p_flag_of_verdicts({"approve": 0.7, "intervene": 0.3}) == pytest.approx(0.3)
    assert p_flag_of_verdicts({}) is None and p_flag_of_verdicts(None) is None


def test_it_reads_a_runtime_records_label_from_its_provenance_or_its_completion():
    assert runtime_label({"provenance": {"decision": "intervene"}}) is True
    assert runtime_label({"completion": [{"role": "assistant", "content": "DECISION: approve\nFEEDBACK: ok"}]}) is False
    assert runtime_label({"completion": [{"role": "assistant", "content": "VERDICT: optimal"}]}) is None
    assert runtime_label({"provenance": "not a dict"}) is None


def test_it_reports_scores_from_a_file_through_the_cli(tmp_path, capsys):
    from nlac_core.cli import main

    rows = [{"task": f"t{k % 4}", "p_flag": p, "flagged": p >= 0.5, "label": y}
            for k, (p, y) in enumerate([(0.9, True), (0.2, False), (0.6, False), (0.7, True), (0.1, False),
                                        (0.4, True), (0.8, True), (0.3, False)])]
    scores = tmp_path / "scores.jsonl"
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "report.json"
    assert main(["evaluate-critic", "--scores", str(scores), "--report", str(out)]) == 0
    printed = capsys.readouterr().out
    expected = critic_report([Judged(r["task"], r["p_flag"], r["flagged"], r["label"]) for r in rows])
    assert json.loads(out.read_text())["scores"] == json.loads(json.dumps(expected))
    assert f"AUROC {expected['auroc']:.3f}" in printed and "balanced accuracy" in printed
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "t", "p_flag": 0.3}\n')
    assert main(["evaluate-critic", "--scores", str(bad)]) == 2
    assert "bad.jsonl, line 1" in capsys.readouterr().err
    assert main(["evaluate-critic"]) == 2


@pytest.mark.slow
def test_it_judges_runtime_records_with_the_embedded_model_through_the_cli(tmp_path, capsys, embedded_model_dir,
                                                                          embedded_backend):
    """Runtime-critic records of real tau-bench steps (split, provenance and task as the Parquet export keeps
    them): the CLI's figures are those of the same records judged in-process, and --split keeps its split only."""
    from nlac_core.cli import main
    from nlac_core.commands.algorithm import load_trajectories
    from nlac_core.critic_eval import judge_runtime_records
    from nlac_core.datasets import runtime_record
    from nlac_core.state import step_of
    from tests.conftest import TAU_GPT4O

    if not TAU_GPT4O.is_file():
        pytest.skip("../shared/data is not beside this checkout")
    trajectories = load_trajectories(str(TAU_GPT4O), None, 6)
    records = []
    for k, t in enumerate(trajectories):
        for index, verdict in ((1, "optimal"), (2, "suboptimal")):
            r = runtime_record(step_of(t, index), t.policy, verdict, "check the booking first", {}, "label", 500,
                               max_policy_chars=300)
            records.append({**r, "split": "test" if k % 2 else "train", "task": t.task.external_id,
                            "provenance": json.dumps(r["provenance"])})
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "report.json"
    assert main(["evaluate-critic", "--records", str(path), "--model", str(embedded_model_dir),
                 "--report", str(out)]) == 0
    test = [{**r, "provenance": json.loads(r["provenance"])} for r in records if r["split"] == "test"]
    expected = critic_report(judge_runtime_records(embedded_backend, test, [r["task"] for r in test]))
    got = json.loads(out.read_text())["critic"]
    assert got["n"] == len(test) == 6 and got["positives"] == 3
    assert got["auroc"] == pytest.approx(expected["auroc"]) and got["positivity"] == expected["positivity"]
    assert "critic: n=6 tasks=3" in capsys.readouterr().out
