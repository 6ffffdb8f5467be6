"""E3's quick run (bench/bench_corrections_loop.py --quick) as a subprocess on the real tau-bench run: the whole
loop of corrections -> gold -> snapshots -> train-critic -> evaluate-critic runs, and its report holds what the
experiment claims to measure. The numbers themselves are not asserted (a quick run is too small to mean them)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT, TAU_GPT4O

pytestmark = [pytest.mark.slow, pytest.mark.heavy,
              pytest.mark.skipif(not TAU_GPT4O.is_file(), reason="../shared/data is not beside this checkout")]

FIGURES = ("auroc", "balanced_accuracy", "false_alarm_rate", "recall", "positivity", "brier")


def _in_unit(report: dict, key: str) -> None:
    value = report[key]
    if value is None:
        assert key in report["undefined"] or key in ("positivity", "brier"), (key, report["undefined"])
    else:
        assert 0.0 <= value <= 1.0, (key, value)
    interval = report.get(f"{key}_ci95")
    if interval is not None:
        assert 0.0 <= interval[0] <= interval[1] <= 1.0, (key, interval)


def test_it_runs_the_corrections_loop_and_reports_base_and_trained_at_each_size(tmp_path):
    from nlac_core.datasets import split_of

    db, report_path = tmp_path / "e3.sqlite3", tmp_path / "e3.json"
    proc = subprocess.run([sys.executable, "bench/bench_corrections_loop.py", "--quick", "--db", f"sqlite:///{db}",
                           "--report", str(report_path)], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = json.loads(report_path.read_text(encoding="utf-8"))

    # the criterion is in the report, and was printed before the first job ran
    assert "lower bound above 0.5" in out["criterion"] and out["quick"] is True
    lines = proc.stdout.splitlines()
    first_job = next(n for n, line in enumerate(lines) if line.strip().startswith("critique step"))
    assert any(line.startswith("criterion (fixed before the run):") for line in lines[:first_job])
    assert isinstance(out["criterion_met"], bool)

    sizes = out["sizes"]
    assert sizes == sorted(sizes) and len(sizes) >= 2
    curve = out["curve"]
    assert [p["size"] for p in curve] == sizes
    base_jobs = set()
    for point in curve:
        for who in ("trained", "base"):
            report = point[who]
            assert report["n"] >= 2 and 1 <= report["positives"] < report["n"], (who, report)
            for key in FIGURES:
                _in_unit(report, key)
        # the base is the same checkpoint on the same steps, judged once by the base's own evaluation
        assert point["base"]["from_job"] == out["base_job"] and point["base"]["n"] == point["trained"]["n"]
        base_jobs.add(json.dumps({k: point["base"][k] for k in ("auroc", "positivity", "brier")}))
        assert point["checkpoint"] != point["base"]["checkpoint"]
    assert len(base_jobs) == 1

    # gold counts: each version's train split holds exactly the requested number of accepted revisions, and the
    # test split the same gold revisions in every version (read from the run's database, not from its report)
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "select s.version, r.split, r.source, count(*), count(distinct r.revision_id) from datasets_snapshotrecord "
            "r join datasets_snapshot s on s.id = r.snapshot_id group by 1, 2, 3").fetchall()
        accepted = con.execute("select count(*) from annotation_annotation where state = 'accepted' and "
                               "accepted_revision_id is not null").fetchone()[0]
        tests = {v: tuple(sorted(x for (x,) in con.execute(
            "select r.revision_id from datasets_snapshotrecord r join datasets_snapshot s on s.id = r.snapshot_id "
            "where s.version = ? and r.split = 'test'", (v,)))) for v in range(1, len(sizes) + 1)}
    counts = {(version, split, source): (n, distinct) for version, split, source, n, distinct in rows}
    assert {source for _, _, source in counts} == {"gold"}
    for version, size in enumerate(sizes, 1):
        assert counts[(version, "train", "gold")] == (size, size)
    assert len(set(tests.values())) == 1 and len(tests[1]) == curve[0]["trained"]["n"]
    assert accepted == sizes[-1] + len(tests[1])

    # splits by task: no task in both, and each task where the dataset's seeded split puts it
    for version, splits in out["splits"].items():
        train, test = set(splits["train_tasks"]), set(splits["test_tasks"])
        assert train and test and not train & test, version
        assert {split_of(t, (0.6, 0.0, 0.4), out["seed"]) for t in train} == {"train"}
        assert {split_of(t, (0.6, 0.0, 0.4), out["seed"]) for t in test} == {"test"}

    # the compare page's rows were printed, one column per checkpoint (the base and one per size)
    assert [row["key"] for row in out["compare_table"]][:2] == ["auroc", "balanced_accuracy"]
    assert all(len(row["columns"]) == len(sizes) + 1 for row in out["compare_table"])
    assert "AUROC of P(not optimal / intervene)" in proc.stdout
