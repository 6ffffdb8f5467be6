"""E2's quick run (bench/bench_backup_propagation.py --quick) as a subprocess on the real tau-bench run: backup ->
train-critic -> target update for every schedule, the Monte Carlo reference and the placebo, two iterations, and
its report holds what the experiment claims to measure. The numbers themselves are not asserted (a quick run is
too small to mean them)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT, TAU_GPT4O

pytestmark = [pytest.mark.slow, pytest.mark.heavy,
              pytest.mark.skipif(not TAU_GPT4O.is_file(), reason="../shared/data is not beside this checkout")]

SCHEDULE_ARMS = ("polyak 0.05", "polyak 0.2", "polyak 0.5", "hard copy")
ARMS = (*SCHEDULE_ARMS, "reference", "placebo")


def _unit_or_undefined(value) -> None:
    assert value is None or (isinstance(value, int | float) and 0.0 <= value <= 1.0), value


def test_it_runs_every_schedule_and_reports_t_and_t_minus_1_on_held_out_tasks(tmp_path):
    db, report_path = tmp_path / "e2.sqlite3", tmp_path / "e2.json"
    proc = subprocess.run([sys.executable, "bench/bench_backup_propagation.py", "--quick", "--db",
                           f"sqlite:///{db}", "--report", str(report_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = json.loads(report_path.read_text(encoding="utf-8"))

    # the criterion and the default rule are in the report, and were printed before the first job ran
    assert "lower bound above 0.5" in out["criterion"] and "placebo" in out["criterion"]
    assert "polyak 0.05" in out["default_rule"] and out["quick"] is True
    lines = proc.stdout.splitlines()
    first_job = next(n for n, line in enumerate(lines) if line.strip().startswith("backup, iteration 1"))
    assert any(line.startswith("criterion (fixed before the run):") for line in lines[:first_job])

    # train and held-out tasks are disjoint, and the figures come from the held-out side only
    splits = out["splits"]
    train_tasks, held_tasks = set(splits["train"]["tasks"]), set(splits["held_out"]["tasks"])
    assert train_tasks and held_tasks and not train_tasks & held_tasks
    held_episodes = splits["held_out"]["episodes"]
    assert held_episodes >= 2 and 1 <= splits["held_out"]["won"] < held_episodes

    arms = out["arms"]
    assert set(arms) == set(ARMS)
    for arm in ARMS:
        iterations = arms[arm]["iterations"]
        assert set(iterations) == {"0", "1", "2"}, arm
        for figures in iterations.values():
            assert set(figures) == {"T", "T-1"}
            for f in figures.values():
                assert f["n"] == held_episodes and f["tasks"] == len(held_tasks)
                for key in ("auroc", "brier", "base_rate_brier", "mean_predicted", "success_rate"):
                    _unit_or_undefined(f[key])
                # won and lost episodes on the held-out side: AUROC and Brier are defined
                assert f["auroc"] is not None and f["brier"] is not None and f["mean_predicted"] is not None
                if f["auroc_ci95"] is not None:  # None with too few resamples where AUROC is defined
                    low, high = f["auroc_ci95"]
                    assert 0.0 <= low <= high <= 1.0
        checkpoints = arms[arm]["checkpoints"]
        assert len({checkpoints["0"], checkpoints["1"], checkpoints["2"]}) == 3, arm  # each iteration trained

    # iteration 0 is the base model for every arm; iteration 1 is shared by the schedules, iteration 2 is not
    assert len({arms[a]["checkpoints"]["0"] for a in ARMS}) == 1
    assert len({json.dumps(arms[a]["iterations"]["0"], sort_keys=True) for a in ARMS}) == 1
    assert len({arms[a]["checkpoints"]["1"] for a in SCHEDULE_ARMS}) == 1
    assert len({arms[a]["checkpoints"]["2"] for a in SCHEDULE_ARMS}) == 4
    assert arms["reference"]["checkpoints"]["1"] not in {arms[a]["checkpoints"]["1"] for a in SCHEDULE_ARMS}

    # the reference's T-1 targets carry the real outcomes exactly; the placebo's the same outcomes, shuffled
    reference = arms["reference"]["backup_targets"]["1"]
    assert reference["auroc_vs_real"] == 1.0
    train_rate = splits["train"]["won"] / splits["train"]["episodes"]
    assert arms["placebo"]["backup_targets"]["1"]["share_success"] == pytest.approx(train_rate)
    # what the training records say: the sampled and the thresholded OUTCOME words, both reported; a real
    # outcome (the Monte Carlo arms) is the same word either way
    for arm in ARMS:
        for t in arms[arm]["backup_targets"].values():
            assert set(t["word_auroc_vs_real"]) == set(t["word_share_success"]) == {"sample", "threshold"}
            _unit_or_undefined(t["mean_p"])
            for how in ("sample", "threshold"):
                _unit_or_undefined(t["word_share_success"][how])
    assert reference["word_auroc_vs_real"] == {"sample": 1.0, "threshold": 1.0}
    assert "OUTCOME words (sampled | thresholded)" in proc.stdout

    verdict = out["verdict"]
    assert isinstance(verdict["criterion_met"], bool) and isinstance(verdict["expected_shape"], bool)
    assert verdict["default_schedule"] in SCHEDULE_ARMS
    assert "criterion met:" in proc.stdout and "default schedule by the rule:" in proc.stdout

    # read from the run's database: five backups (iteration 1, then one per schedule), nine trainings, and the
    # first backup's rows are back as the backup wrote them (T-1 outcomes from the target network, not 0 or 1)
    with sqlite3.connect(db) as con:
        kinds = dict(con.execute("select kind, count(*) from jobs_job where status = 'succeeded' group by kind"))
        first = con.execute("select min(id) from jobs_job where kind = 'backup'").fetchone()[0]
        inner = [p for (p,) in con.execute("select success_prob from jobs_steptarget where job_id = ? and "
                                           "terminal = 0", (first,))]
        next_sources = {json.loads(r)["next_action_source"] for (r,) in con.execute(
            "select record from jobs_steptarget where terminal = 0")}
    assert kinds.get("backup") == 5 and kinds.get("train-critic") == 9
    assert inner and all(p is not None and 0.0 < p < 1.0 for p in inner)
    assert next_sources == {"data"}
