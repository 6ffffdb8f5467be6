"""E1: does the runtime critic learn from first-error labels? The asymmetric actor-critic's data pipeline on
real recorded episodes, through the product's own jobs.

    python bench/bench_critic_learning.py                # the full run (about 40 min alone on 2 cores)
    python bench/bench_critic_learning.py --quick        # 12 tasks, 6 test records, 1 training step: a smoke run
    python bench/bench_critic_learning.py --arms placebo,shortcut   # some arms only (same seed, same splits)

Data: the gpt-4o tau-bench airline run (../shared/data/tau-bench/gpt-4o-airline.json: 200 episodes of 50
tasks), imported through the product. Labels: the critic-data job on the recorded episodes localises each failed
episode's first wrong action by the task's gold actions (intervene there; approve on the correct actions before
it, balanced 1:1 by a seeded sample). They go to a runtime-critic dataset whose splits are by task (half the
tasks train, half test, seeded): no task is in both.

Arms, all scored on the same held-out test records by evaluate-critic jobs (P(intervene) on each record's prompt):

- **base raw**: SmolLM2-135M-Instruct, decision by raw likelihood;
- **base calibrated**: the same with content-free calibration (the product's default). It shifts every step's
  log-odds by the same amount, so its AUROC is the raw one; the decisions (balanced accuracy, positivity) move;
- **trained**: a train-critic job on the snapshot's train split (the product's path);
- **placebo**: the same training on the same records with their decisions (and feedback) shuffled among them,
  seeded: the same data and compute without the label-to-step link;
- **shortcut**: logistic regression on surface features of the step (tool name, state-changing or not, step
  position), fitted on the train split: what a critic could score without reading anything.

Each with AUROC, balanced accuracy, false-alarm rate (95% intervals by bootstrap over test tasks), positivity,
and the Brier score against the base rate; beside them the majority class.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

from _experiment import TAU_GPT4O, Experiment, add_common_args, fmt, interval

CRITERION = ("the trained critic's AUROC on the held-out tasks has a 95% lower bound (bootstrap by task) above "
             "0.5 and above the placebo's point estimate")
DATASET = "E1 runtime critic"
ARMS = ("base raw", "base calibrated", "trained", "placebo", "shortcut")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--tasks", type=int, default=50, help="use the episodes of the first N tasks (of 50)")
    parser.add_argument("--train-steps", type=int, default=60, help="optimizer steps of each training")
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-state-chars", type=int, default=1000)
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--test-steps", type=int, default=100_000, help="score at most N held-out records")
    parser.add_argument("--arms", default=",".join(ARMS),
                        help="comma-separated arms to run, of: " + ", ".join(ARMS) + " (default: all). The data, "
                             "splits and test records depend on the seed only, so arms of two runs with one seed "
                             "are scored on the same items; the criterion is judged when trained and placebo ran")
    args = parser.parse_args(argv)
    wanted = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not wanted or set(wanted) - set(ARMS):
        parser.error(f"--arms: {args.arms!r}: each arm must be one of {', '.join(ARMS)}")
    if args.quick:  # the pipeline end to end, not a result: 6 held-out records, one training step
        args.tasks, args.train_steps, args.test_steps = min(args.tasks, 12), 1, min(args.test_steps, 6)

    exp = Experiment("critic-learning", args)
    exp.criterion(CRITERION)
    exp.say(f"E1 on {TAU_GPT4O.name}: the first {args.tasks} tasks, seed {args.seed}, {args.train_steps} training "
            f"steps at lr {args.learning_rate} (batch {args.batch_size}), states cut to {args.max_state_chars} chars")
    snapshot = labelled_snapshot(exp, args)
    arms = {}
    common = {"snapshot": snapshot.pk, "split": "test", "max_steps": args.test_steps, "chunk_size": 8,
              "max_state_chars": args.max_state_chars}
    if "base raw" in wanted:
        arms["base raw"] = exp.job("evaluate-critic", {**common, "calibrate_verdicts": False},
                                   label="base raw")["critic"]
    if "base calibrated" in wanted:
        arms["base calibrated"] = exp.job("evaluate-critic", common, label="base calibrated")["critic"]
    # a checkpoint's evaluation puts the base's figures beside it, from the base calibrated arm's job when it ran
    # (else it would judge every record with the base again)
    common["compare_base"] = "base calibrated" in wanted
    train = {"snapshot": snapshot.pk, "max_steps": args.train_steps, "learning_rate": args.learning_rate,
             "per_device_batch_size": args.batch_size, "max_length": args.max_length, "seed": args.seed,
             "max_state_chars": args.max_state_chars}
    if "trained" in wanted:
        trained = exp.job("train-critic", {**train, "name": "E1 trained"}, label="train-critic (trained)")
        exp.result("trained_loss", trained.get("train_loss"))
        out = exp.job("evaluate-critic", {**common, "checkpoint": trained["checkpoint_produced"]}, label="trained")
        arms["trained"] = out["critic"]
        exp.result("trained_base_from_job", (out.get("base") or {}).get("from_job"))
    if "placebo" in wanted:
        placebo = train_placebo(exp, snapshot, train, args)
        arms["placebo"] = exp.job("evaluate-critic", {**common, "checkpoint": placebo}, label="placebo")["critic"]
    if "shortcut" in wanted:
        arms["shortcut"] = shortcut(snapshot, args.seed, common)
    report(exp, arms)
    exp.finish()
    return 0


def labelled_snapshot(exp: Experiment, args):
    """Import, a runtime-critic dataset split by task (half and half), the critic-data job's labels, the
    snapshot it builds; checks that no task is in two splits."""
    from webapp.datasets.models import Snapshot
    from webapp.datasets.services.datasets import check_create_dataset
    from webapp.trajectories.models import Trajectory

    project = exp.import_file(TAU_GPT4O, "E1 airline gpt-4o")
    check_create_dataset(exp.researcher, DATASET, "runtime_critic", project,
                         {"fractions": [0.5, 0.0, 0.5], "split_seed": args.seed,
                          "max_state_chars": args.max_state_chars},
                         description="E1: first-error labels of the gpt-4o airline run, split by task")
    rows = Trajectory.objects.filter(project=project).order_by("id")
    tasks = sorted({t for t in rows.values_list("task__external_id", flat=True)}, key=_task_order)[:args.tasks]
    ids = list(rows.filter(task__external_id__in=tasks).values_list("id", flat=True))
    data = exp.job("critic-data", {"train": False, "approve_ratio": 1.0, "seed": args.seed, "dataset": DATASET},
                   {"trajectory_ids": ids}, label="critic-data (first-error labels)")
    snapshot = Snapshot.objects.get(pk=data["snapshot"])
    splits: dict[str, set[str]] = {}
    counts: dict[str, dict[str, int]] = {}
    for split, key, data_row in snapshot.records.values_list("split", "task_key", "data"):
        splits.setdefault(split, set()).add(key)
        decision = (data_row.get("provenance") or {}).get("decision", "?")
        counts.setdefault(split, {}).setdefault(decision, 0)
        counts[split][decision] += 1
    if splits.get("train", set()) & splits.get("test", set()):
        raise SystemExit("a task is in both the train and the test split")
    exp.say(f"episodes {data['episodes']} of {len(tasks)} tasks; targets {json.dumps(data['targets'])}; "
            f"unlocalised failed episodes {data['unlocalised_episodes']}")
    exp.say("records per split: " + "; ".join(f"{s} {len(splits[s])} tasks {json.dumps(counts[s])}"
                                              for s in sorted(splits)))
    exp.result("splits", {s: {"tasks": sorted(v), "records": counts[s]} for s, v in splits.items()})
    return snapshot


def _task_order(task: str) -> tuple[int, str]:
    return (int(task), task) if task.isdigit() else (10**9, task)


def train_placebo(exp: Experiment, snapshot, train: dict[str, Any], args) -> int:
    """The trained arm's training (same trainer, settings, records and steps) with the completions shuffled among
    the train records; registered as a checkpoint whose parent is the base, so evaluate-critic compares it."""
    import time

    from django.conf import settings

    from nlac_core.training import train_sft
    from webapp.datasets.services.build import snapshot_records
    from webapp.jobs.configs import TrainCriticJob
    from webapp.jobs.services.checkpoints import do_register_checkpoint, embedded_checkpoint

    records = list(snapshot_records(snapshot, "train"))
    completions = [r["completion"] for r in records]
    random.Random(args.seed).shuffle(completions)
    shuffled = [{**r, "completion": c} for r, c in zip(records, completions, strict=True)]
    moved = sum(a["completion"] != b["completion"] for a, b in zip(records, shuffled, strict=True))
    base = embedded_checkpoint()
    config = TrainCriticJob.parse({k: v for k, v in train.items() if k != "snapshot"})
    started = time.monotonic()
    result = train_sft(shuffled, base.path, settings.NLAC_TRAIN_DIR / "e1-placebo", config.sft_config(),
                       parent_checkpoint=base.path, name="E1 placebo", kind="critic")
    checkpoint = do_register_checkpoint(result.checkpoint_dir, name="E1 placebo", kind="critic", parent=base)
    exp.say(f"  placebo training: {len(shuffled)} records, {moved} of them with another record's label, "
            f"{time.monotonic() - started:.0f} s, loss {result.metrics['train_loss']:.4f}")
    exp.result("placebo_loss", result.metrics["train_loss"])
    return checkpoint.pk


def shortcut(snapshot, seed: int, evaluation: dict[str, Any]) -> dict[str, Any]:
    """Logistic regression on the step's tool name, whether it changes state, and its position; fitted on the
    train split's records, scored on the held-out records the critics were scored on (the evaluate-critic job's
    own choice of them), by the same report."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    from nlac_core.actions import render_message_action
    from nlac_core.critic_eval import Judged, critic_report
    from nlac_core.state import step_of
    from nlac_core.supervision import is_state_changing
    from webapp.jobs.configs import EvaluateCriticJob
    from webapp.jobs.runners.evaluate_critic import held_out
    from webapp.trajectories.models import Trajectory
    from webapp.trajectories.services.exports import iter_with_ids

    test = held_out(EvaluateCriticJob.parse(evaluation), "runtime_critic")
    train = list(snapshot.records.filter(split="train", source="label").order_by("position"))
    rows = train + test
    trajectories = dict(iter_with_ids(Trajectory.objects.filter(pk__in={r.trajectory_id for r in rows})))

    def features(r) -> dict[str, Any]:
        action = step_of(trajectories[r.trajectory_id], r.step_index).action
        name = action.tool_calls[0].name if action.tool_calls else "(reply)"
        return {"tool=" + name: 1.0, "state_changing": float(is_state_changing(render_message_action(action))),
                "position": float(r.step_index)}

    def label(r) -> int:
        return int(r.data["provenance"]["decision"] == "intervene")

    vectorizer = DictVectorizer()
    x_train = vectorizer.fit_transform([features(r) for r in train])
    y_train = [label(r) for r in train]
    if len(set(y_train)) < 2:
        return critic_report([])
    model = LogisticRegression(max_iter=1000, random_state=seed).fit(x_train, y_train)
    probs = model.predict_proba(vectorizer.transform([features(r) for r in test]))[:, 1]
    return critic_report([Judged(r.task_key, float(p), bool(p >= 0.5), bool(label(r)))
                          for r, p in zip(test, probs, strict=True)])


def report(exp: Experiment, arms: dict[str, dict[str, Any]]) -> None:
    first = next(iter(arms.values()))
    m = first["majority"]
    exp.say(f"\nheld-out test split: {first['n']} records of {first['tasks']} tasks, {first['positives']} labelled "
            f"intervene; majority class '{m['label']}': accuracy {fmt(m['accuracy'])}, balanced accuracy "
            f"{fmt(m['balanced_accuracy'])}, AUROC {fmt(m['auroc'])}")
    exp.say(f"{'arm':<16} {'AUROC [95% CI by task]':<27} {'balanced acc [CI]':<25} {'false alarms [CI]':<25} "
            f"{'positivity':>10} {'Brier':>7} {'base-rate Brier':>15}")
    for name, r in arms.items():
        exp.say(f"{name:<16} {fmt(r['auroc']):>6} {interval(r['auroc_ci95']):<20} "
                f"{fmt(r['balanced_accuracy']):>6} {interval(r['balanced_accuracy_ci95']):<18} "
                f"{fmt(r['false_alarm_rate']):>6} {interval(r['false_alarm_rate_ci95']):<18} "
                f"{fmt(r['positivity']):>10} {fmt(r['brier']):>7} {fmt(r['base_rate_brier']):>15}")
        for key, why in (r.get("undefined") or {}).items():
            exp.say(f"{'':<16} {key} undefined: {why}")
    exp.result("arms", arms)
    if "trained" not in arms or "placebo" not in arms:
        exp.say(f"\ncriterion: {CRITERION}\n  not judged in this run: it needs the trained and the placebo arm")
        exp.result("criterion_met", None)
        return
    trained, placebo = arms["trained"], arms["placebo"]
    lower = (trained.get("auroc_ci95") or [None])[0]
    met = lower is not None and lower > 0.5 and placebo.get("auroc") is not None and lower > placebo["auroc"]
    exp.say(f"\ncriterion: {CRITERION}\n  trained lower bound {fmt(lower)}, placebo AUROC {fmt(placebo.get('auroc'))}"
            f" -> {'MET' if met else 'NOT MET'}")
    exp.result("criterion_met", met)


if __name__ == "__main__":
    sys.exit(main())
