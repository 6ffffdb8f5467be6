"""E2: does the language Bellman backup carry outcomes back? Two iterations of backup + critic training on the
last two agent steps of real recorded episodes, under each target-network schedule, through the product's jobs.

    python bench/bench_backup_propagation.py                 # the full run: about 65 min alone on 2 cores
    python bench/bench_backup_propagation.py --quick         # 2 + 2 episodes, 1 training step: the pipeline

The full run's size is set by the hour it may take on 2 CPU cores: all 50 tasks, but one episode per task (trial 0)
on both sides (23 train tasks, 27 held-out tasks), 24 optimizer steps (about one epoch of the 46 train records) per
training. Its cost is 10 scorings of the 54 held-out steps, 5 backups of the 46 train steps and 9 trainings. On a
machine shared with other model processes, run it with OMP_NUM_THREADS=1: two torch threads per process on two
shared cores stall at every small operation (token-by-token decoding becomes several times slower).

Data: the gpt-4o tau-bench airline run (../shared/data/tau-bench/gpt-4o-airline.json: 200 episodes of 50 tasks,
real rewards), imported through the product. Tasks are split in two by a seeded hash of the task id
(``nlac_core.datasets.split_of``): the backups and trainings use only the train tasks' episodes, and every figure is
measured on the held-out tasks' episodes only. No task is on both sides.

Steps: the last two agent steps of each episode, T (terminal: its Bellman target is the real outcome) and T-1 (its
target's outcome is what the target network predicts at (s_T, a_T), the recorded next action: ``next_action="data"``).
An outcome can only reach T-1 through the target network, after it has learnt T.

One iteration = a backup job (targets for T and T-1 of the train episodes; policy/composer = the online checkpoint,
d_t+1 from the target network) -> a train-critic job (successor SFT on those targets, from the online checkpoint) ->
the target update by the arm's schedule (``nlac_core.ema.TargetSchedule``: Polyak tau, or a hard copy), as the
nlac-iteration job does it. Two iterations. The online model continues from its previous checkpoint.

Arms:
- **polyak 0.05** (the current default), **polyak 0.2**, **polyak 0.5**, **hard copy** (every update). The target
  starts as a copy of the base model, so iteration 1 is the same computation under every schedule: it is run once
  and shared (the schedules differ from the first target update on, i.e. in iteration 2's backup);
- **reference**: the same backup text and the same training, but every target carries its episode's real outcome
  (Monte Carlo; at T this is what the Bellman target says anyway, at T-1 it is the answer the backup should reach);
- **placebo**: the reference's targets (text and outcome together) permuted among the train episodes at the same
  position (seeded): the same data and compute without the link from a step to its own outcome.

The product has no Monte Carlo target job: the reference and placebo train on iteration 1's backup (the same rows,
the same text) with the outcomes rewritten by this script, each training job freezing its records in its job folder;
the rows are then put back as the backup wrote them. So the reference differs from the Bellman arms' iteration 1 in
the T-1 outcomes alone. Their iteration 2 trains again, from their iteration-1 checkpoint, on the same targets
(Monte Carlo targets do not bootstrap).

Measured with each arm's checkpoint after each iteration (iteration 0 = the base model, the same for every arm):
P(success) of M(s, a) at T and T-1 of the held-out episodes, by likelihood of "success" against "failure" after a
greedy FUTURE of 64 tokens (16 in the quick run): ``nlac_core.successor.predict_futures``, the calls the
calibrate-outcome job makes. That job itself is not used: its Platt fit fails when its fit half holds one outcome
(as in the quick run), and it writes the fit onto the checkpoint.
Figures (``nlac_core.outcome.outcome_report``): AUROC of won against lost episodes with a bootstrap 95% interval
resampled by task, the Brier score beside the base-rate predictor's (the held-out success rate), mean P(success).
Beside them, for each backup, the AUROC of its T-1 targets' outcomes against the real outcomes of the train
episodes: whether the backup itself carried anything, before any training; and the same for the OUTCOME words the
training records say: drawn from each target's P(success), seeded per step (the default, ``outcome_target="sample"``:
d_t+1 is a sample of M_target), beside the likelier word (``"threshold"``), which says "success" for every P above
0.5 and so carries nothing back while the target network says about 0.9 everywhere.

The success criterion (``CRITERION``) and the rule that picks the default schedule (``DEFAULT_RULE``) are fixed here
and printed before the run.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _experiment import TAU_GPT4O, Experiment, add_common_args, fmt, interval

SCHEDULES: dict[str, tuple[str, float, int]] = {  # arm -> TargetSchedule(kind, tau, every)
    "polyak 0.05": ("polyak", 0.05, 1),
    "polyak 0.2": ("polyak", 0.2, 1),
    "polyak 0.5": ("polyak", 0.5, 1),
    "hard copy": ("hard", 1.0, 1),
}
REFERENCE, PLACEBO = "reference", "placebo"
ARMS = (*SCHEDULES, REFERENCE, PLACEBO)
POSITIONS = ("T", "T-1")
ITERATIONS = (0, 1, 2)
CURRENT_DEFAULT = "polyak 0.05"
RISE = 0.05  # the least AUROC rise at T-1 from iteration 1 to 2 that counts as propagation
TIE = 0.02  # the current default is kept when it propagates within this AUROC of the best schedule

CRITERION = (
    "On the held-out tasks' episodes, AUROC of P(success) (won vs lost episodes; 95% interval by bootstrap over "
    "tasks). (1) T is learnt: after iteration 1 the Bellman arms' AUROC at T has a 95% lower bound above 0.5 "
    "(iteration 1 is the same for every schedule). (2) A schedule propagates when after iteration 2 its AUROC at T-1 "
    f"has a 95% lower bound above 0.5 and is at least {RISE} above its AUROC at T-1 after iteration 1. (3) The "
    "placebo (shuffled outcomes) has a 95% lower bound of at most 0.5 at T and at T-1 after both iterations "
    "(otherwise the measurement is not valid). E2 succeeds when (1) and (3) hold and at least one schedule "
    "propagates. Brier scores are reported beside the base-rate predictor's; they do not decide."
)
DEFAULT_RULE = (
    "The default schedule: if E2 succeeds, the propagating schedule with the highest AUROC at T-1 after iteration 2, "
    f"except that the current default ({CURRENT_DEFAULT}) is kept if it propagates within {TIE} of the best. If E2 "
    f"does not succeed, the default stays {CURRENT_DEFAULT} (nothing measured supports a change). The expected shape: "
    "T is learnt after iteration 1; T-1 rises only in iteration 2 and only under a target that moved (hard copy, 0.5, "
    "perhaps 0.2), not under 0.05 (whose target is still 95% the base model): that pattern moves the default to the "
    "best moving schedule; T-1 rising equally under 0.05 would mean it learnt T-1 from T's examples (generalisation), "
    "not through the backup."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--tasks", type=int, default=50, help="use the episodes of the first N tasks (of 50)")
    parser.add_argument("--trials", type=int, default=1, help="episodes per train task (trials 0..N-1, of 4)")
    parser.add_argument("--held-trials", type=int, default=1, help="episodes per held-out task (trials 0..N-1)")
    parser.add_argument("--train-fraction", type=float, default=0.5, help="share of tasks used for training")
    parser.add_argument("--train-steps", type=int, default=24, help="optimizer steps of each training")
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-state-chars", type=int, default=800)
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--future-tokens", type=int, default=64, help="the FUTURE written before P(success) is read "
                        "(64: as the calibrate-outcome job and the backup's d_t+1)")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.held_trials, args.train_steps, args.future_tokens = 1, 1, 1, 16

    exp = Experiment("backup-propagation", args)
    exp.criterion(CRITERION)
    exp.say(f"default rule (fixed before the run): {DEFAULT_RULE}")
    exp.result("default_rule", DEFAULT_RULE)
    exp.say(f"E2 on {TAU_GPT4O.name}: " + ("2 train + 2 held-out episodes (one won, one lost on each side)"
                                            if args.quick else f"the first {args.tasks} tasks, {args.trials} "
                                            f"episode(s) per train task and {args.held_trials} per held-out task")
            + f", seed {args.seed}, "
            f"{args.train_steps} training steps per iteration at lr {args.learning_rate} (batch {args.batch_size}, "
            f"max_length {args.max_length}), states cut to {args.max_state_chars} chars; 2 iterations; arms "
            f"{', '.join(ARMS)}" + ("; QUICK: the pipeline, not a result" if args.quick else ""))
    try:
        run(exp, args)
        exp.finish()
    finally:
        _remove_quick_scratch()
    return 0


# -- data ------------------------------------------------------------------------------------------------------------

class Episodes:
    """The imported episodes, split by task: (trajectory id, record) of the train and held-out sides."""

    def __init__(self, exp: Experiment, args) -> None:
        from nlac_core.datasets import split_of
        from webapp.trajectories.models import Trajectory
        from webapp.trajectories.services.exports import iter_with_ids

        project = exp.import_file(TAU_GPT4O, "E2 airline gpt-4o")
        rows = Trajectory.objects.filter(project=project)
        every = sorted(set(rows.values_list("task__external_id", flat=True)), key=_task_order)
        fractions = (args.train_fraction, 0.0, 1.0 - args.train_fraction)
        self.split = {task: split_of(task, fractions, args.seed) for task in every}
        trials = {"train": args.trials, "test": args.held_trials}
        chosen = []
        for pk, record in iter_with_ids(rows.filter(task__external_id__in=every[:args.tasks])):
            if record.trial < trials[self.split[record.task.external_id]] and len(record.steps) >= 2 \
                    and record.reward is not None:
                chosen.append((pk, record))
        if args.quick:  # on each side, the first task whose first episode was won and the first whose was lost
            picked = []
            for side in ("train", "test"):
                for won in (True, False):
                    picked.extend([(pk, r) for pk, r in chosen
                                   if self.split[r.task.external_id] == side and r.success == won][:1])
            chosen = picked
        self.train = [(pk, r) for pk, r in chosen if self.split[r.task.external_id] == "train"]
        self.held = [(pk, r) for pk, r in chosen if self.split[r.task.external_id] == "test"]
        self.train_tasks = sorted({r.task.external_id for _, r in self.train}, key=_task_order)
        self.held_tasks = sorted({r.task.external_id for _, r in self.held}, key=_task_order)
        if set(self.train_tasks) & set(self.held_tasks):
            raise SystemExit("a task is on both sides of the split")
        if not self.train or not self.held:
            raise SystemExit(f"the split left a side empty (train {len(self.train)}, held-out {len(self.held)} "
                             "episodes): use more tasks or another --seed")
        self.train_ids = [pk for pk, _ in self.train]
        self.outcome = {pk: r.success for pk, r in [*self.train, *self.held]}

    def describe(self) -> dict[str, Any]:
        def side(items, tasks):
            return {"tasks": tasks, "episodes": len(items), "won": sum(r.success for _, r in items)}

        return {"train": side(self.train, self.train_tasks), "held_out": side(self.held, self.held_tasks)}


def _task_order(task: str) -> tuple[int, str]:
    return (int(task), task) if task.isdigit() else (10**9, task)


# -- the iterations --------------------------------------------------------------------------------------------------

def run(exp: Experiment, args) -> None:
    from webapp.jobs.services.checkpoints import embedded_checkpoint

    data = Episodes(exp, args)
    exp.result("splits", data.describe())
    d = data.describe()
    exp.say(f"train: {d['train']['episodes']} episodes of {len(d['train']['tasks'])} tasks ({d['train']['won']} won); "
            f"held-out: {d['held_out']['episodes']} episodes of {len(d['held_out']['tasks'])} tasks "
            f"({d['held_out']['won']} won)")
    base = embedded_checkpoint()
    scorer = Scorer(exp, data, args)
    figures: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in ARMS}
    targets: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in ARMS}
    checkpoints: dict[str, dict[int, int]] = {arm: {0: base.pk} for arm in ARMS}

    zero = scorer.score(base.pk, "iteration 0 (base)")
    for arm in ARMS:
        figures[arm][0] = zero

    # iteration 1 of the Bellman arms: the target network is the base model under every schedule (shared)
    backup1 = exp.job("backup", backup_config(args, None, None), {"trajectory_ids": data.train_ids},
                      label="backup, iteration 1 (target = base)")
    shared_targets = target_signal(backup1["_job"], data, args.seed)
    online1 = train(exp, args, data, None, "E2 bellman it1", "train-critic, iteration 1 (Bellman)")

    # the Monte Carlo arms train on the same targets with the outcomes replaced (each training job freezes its
    # records in its job folder); the backup's rows are put back as it wrote them afterwards
    with monte_carlo_rows(backup1["_job"]) as rewrite:
        for arm in (REFERENCE, PLACEBO):
            rewrite(data, shuffle=arm == PLACEBO, seed=args.seed)
            targets[arm][1] = targets[arm][2] = target_signal(backup1["_job"], data, args.seed)
            previous = None
            for iteration in (1, 2):
                previous = train(exp, args, data, previous, f"E2 {arm} it{iteration}",
                                 f"train-critic, iteration {iteration} ({arm})")
                checkpoints[arm][iteration] = previous

    shared1 = scorer.score(online1, "iteration 1 (Bellman, every schedule)")
    for arm in SCHEDULES:
        figures[arm][1], targets[arm][1], checkpoints[arm][1] = shared1, shared_targets, online1
    for arm in (REFERENCE, PLACEBO):
        for iteration in (1, 2):
            figures[arm][iteration] = scorer.score(checkpoints[arm][iteration], f"iteration {iteration} ({arm})")

    from nlac_core.ema import init_target
    from webapp.jobs.models import Checkpoint

    start = Path(_train_dir()) / "e2-target-init"
    init_target(base.path, start)
    online1_row = Checkpoint.objects.get(pk=online1)
    for arm, (kind, tau, every) in SCHEDULES.items():
        target = update_target(start, online1_row, arm, kind, tau, every)
        backup2 = exp.job("backup", backup_config(args, online1, target), {"trajectory_ids": data.train_ids},
                          label=f"backup, iteration 2 ({arm} target)")
        targets[arm][2] = target_signal(backup2["_job"], data, args.seed)
        online2 = train(exp, args, data, online1, f"E2 {arm} it2", f"train-critic, iteration 2 ({arm})")
        checkpoints[arm][2] = online2
        figures[arm][2] = scorer.score(online2, f"iteration 2 ({arm})")

    exp.result("arms", {arm: {"iterations": {str(i): figures[arm][i] for i in ITERATIONS},
                              "backup_targets": {str(i): targets[arm].get(i) for i in (1, 2)},
                              "checkpoints": {str(i): checkpoints[arm][i] for i in ITERATIONS}}
                        for arm in ARMS})
    exp.result("scoring_seconds", round(scorer.seconds, 1))
    table(exp, figures, targets)
    verdict(exp, figures)


def backup_config(args, online: int | None, target: int | None) -> dict[str, Any]:
    return {"checkpoint": online, "target_checkpoint": target, "next_action": "data", "steps": "-2,-1",
            "max_steps": 100_000, "temperature": 0.0, "seed": args.seed, "chunk_size": 8,
            "max_state_chars": args.max_state_chars, "batch_size": 8}


def train(exp: Experiment, args, data: Episodes, base: int | None, name: str, label: str) -> int:
    out = exp.job("train-critic", {"checkpoint": base, "source": "targets", "name": name,
                                   "max_steps": args.train_steps, "epochs": 1.0, "learning_rate": args.learning_rate,
                                   "per_device_batch_size": args.batch_size, "max_length": args.max_length,
                                   "seed": args.seed, "max_state_chars": args.max_state_chars},
                  {"trajectory_ids": data.train_ids}, label=label)
    exp.say(f"    {out['records']} records, {out['steps']} steps, train loss {fmt(out.get('train_loss'))}")
    return out["checkpoint_produced"]


def update_target(start: Path, online, arm: str, kind: str, tau: float, every: int) -> int:
    """The target network after iteration 1 under the arm's schedule (``nlac_core.ema.update_target``, as the
    nlac-iteration job's EMA phase does), registered as a checkpoint. ``Checkpoint.ema_of`` is one-to-one, so the
    four targets of the one shared online checkpoint are registered without it (the backup names its target)."""
    from nlac_core.ema import TargetSchedule
    from nlac_core.ema import update_target as ema_update_target
    from webapp.jobs.services.checkpoints import do_register_checkpoint

    schedule = TargetSchedule(kind, tau, every)
    out = Path(_train_dir()) / f"e2-target-{arm.replace(' ', '-')}"
    ema_update_target(start, online.path, schedule, out_dir=out)
    return do_register_checkpoint(out, name=f"E2 target {arm} after it1", kind="ema", parent=online).pk


def _train_dir() -> str:
    from django.conf import settings

    return str(settings.NLAC_TRAIN_DIR)


@contextmanager
def monte_carlo_rows(job_pk: int):
    """A rewriter of the backup job's StepTarget rows into Monte Carlo targets: the episode's real outcome
    (reference), or the (text, outcome) pairs permuted among the train episodes at the same position, seeded
    (placebo). The rows get back what the backup wrote when the block ends."""
    from webapp.jobs.models import StepTarget

    rows = list(StepTarget.objects.filter(job_id=job_pk).order_by("trajectory_id", "step_index"))
    written = {row.pk: (row.record, row.success_prob) for row in rows}
    last: dict[int, int] = {}
    for row in rows:
        last[row.trajectory_id] = max(last.get(row.trajectory_id, -1), row.step_index)
    by_position: dict[str, list[Any]] = {"T": [], "T-1": []}
    for row in rows:
        by_position["T" if row.step_index == last[row.trajectory_id] else "T-1"].append(row)

    def rewrite(data: Episodes, shuffle: bool, seed: int) -> None:
        rng = random.Random(f"e2-placebo:{seed}")
        for group in by_position.values():
            content = [(written[row.pk][0]["text"], float(data.outcome[row.trajectory_id])) for row in group]
            if shuffle:
                rng.shuffle(content)
            for row, (text, outcome) in zip(group, content, strict=True):
                row.record = {**written[row.pk][0], "text": text, "success_prob": outcome}
                row.success_prob = outcome
                row.save(update_fields=["record", "success_prob"])

    try:
        yield rewrite
    finally:
        for row in rows:
            row.record, row.success_prob = written[row.pk]
            row.save(update_fields=["record", "success_prob"])


def target_signal(job_pk: int, data: Episodes, seed: int) -> dict[str, Any]:
    """The backup's T-1 targets against the train episodes' real outcomes: the AUROC of their P(success), and the
    agreement of the OUTCOME words the training records say (``successor.outcome_word``: drawn from P with the
    training's seed, the default, and the likelier word beside it), before any training."""
    from nlac_core.outcome import Scored, auroc
    from nlac_core.outputs import from_json
    from nlac_core.successor import outcome_draw, outcome_word
    from webapp.jobs.models import StepTarget

    rows = StepTarget.objects.filter(job_id=job_pk, terminal=False).values_list("trajectory_id", "success_prob",
                                                                                  "record")
    items, words = [], {"sample": [], "threshold": []}
    for tid, p, record in rows:
        if p is None:
            continue
        items.append(Scored("", p, data.outcome[tid]))
        draw = outcome_draw(from_json(record).step, seed)
        for how, out in words.items():
            out.append(Scored("", float(outcome_word(p, how, draw) == "success"), data.outcome[tid]))
    share = {how: sum(i.prob for i in out) / len(out) if out else None for how, out in words.items()}
    return {"t_minus_1_targets": len(items), "auroc_vs_real": auroc(items),
            "share_success": sum(i.prob >= 0.5 for i in items) / len(items) if items else None,
            "mean_p": sum(i.prob for i in items) / len(items) if items else None,
            "word_auroc_vs_real": {how: auroc(out) for how, out in words.items()},
            "word_share_success": share}


# -- measuring -------------------------------------------------------------------------------------------------------

class Scorer:
    """P(success) of M(s_t, a_t) at T and T-1 of the held-out episodes, for one checkpoint at a time."""

    def __init__(self, exp: Experiment, data: Episodes, args) -> None:
        from nlac_core.state import steps_of

        self.exp, self.args, self.seconds = exp, args, 0.0
        self.items = []  # (position, task, success, StepView)
        for _, record in data.held:
            steps = steps_of(record)
            for position, step in (("T", steps[-1]), ("T-1", steps[-2])):
                self.items.append((position, record.task.external_id, record.success, step))

    def score(self, checkpoint_pk: int, label: str) -> dict[str, Any]:
        from nlac_core.critic import CritiqueConfig
        from nlac_core.outcome import Scored, outcome_report
        from nlac_core.successor import predict_futures, transition_of
        from webapp.jobs import loaded_model
        from webapp.jobs.configs import CalibrateOutcomeJob
        from webapp.jobs.models import Checkpoint

        started = time.monotonic()
        config = CalibrateOutcomeJob(checkpoint=checkpoint_pk, batch_size=8)
        backend = loaded_model.backend_for(config, Checkpoint.objects.get(pk=checkpoint_pk))
        spec = CritiqueConfig(seed=self.args.seed).spec(self.args.future_tokens)
        probs: list[float | None] = []
        for begin in range(0, len(self.items), 8):
            chunk = self.items[begin:begin + 8]
            futures = predict_futures(backend, [transition_of(s, None, self.args.max_state_chars)
                                                for *_, s in chunk], spec)
            probs.extend(f[0].success_prob for f in futures)
        out = {}
        for position in POSITIONS:
            scored = [Scored(task, p, ok) for (pos, task, ok, _), p in zip(self.items, probs, strict=True)
                      if pos == position and p is not None]
            report = outcome_report(scored, seed=self.args.seed)
            out[position] = {k: report[k] for k in ("n", "tasks", "success_rate", "mean_predicted", "auroc",
                                                    "auroc_ci95", "brier", "base_rate_brier", "flags")}
        elapsed = time.monotonic() - started
        self.seconds += elapsed
        self.exp.say(f"  scored {label}: {len(self.items)} held-out steps, {elapsed:.0f} s; AUROC T "
                     f"{fmt(out['T']['auroc'])}, T-1 {fmt(out['T-1']['auroc'])}")
        return out


def table(exp: Experiment, figures, targets) -> None:
    exp.say("\nP(success) on the held-out episodes (AUROC [95% by task]; Brier vs the base-rate Brier; mean P):")
    exp.say(f"{'arm':<12} {'it':>2} {'pos':<4} {'n':>4} {'AUROC':>9} {'95% CI':<17} {'Brier':>6} {'base':>6} "
            f"{'meanP':>6}  T-1 targets vs real outcomes: AUROC of P, mean P; OUTCOME words (sampled | "
            "thresholded): AUROC, share 'success'")
    for arm in ARMS:
        for i in ITERATIONS:
            for position in POSITIONS:
                f = figures[arm][i][position]
                extra = ""
                if position == "T-1" and i in targets[arm]:
                    t = targets[arm][i]
                    wa, ws = t["word_auroc_vs_real"], t["word_share_success"]
                    extra = (f"  {fmt(t['auroc_vs_real'])}, {fmt(t['mean_p'], '.2f')}; {fmt(wa['sample'])} "
                             f"{fmt(ws['sample'], '.2f')} | {fmt(wa['threshold'])} {fmt(ws['threshold'], '.2f')}")
                exp.say(f"{arm:<12} {i:>2} {position:<4} {f['n']:>4} {fmt(f['auroc']):>9} "
                        f"{interval(f['auroc_ci95']):<17} {fmt(f['brier']):>6} {fmt(f['base_rate_brier']):>6} "
                        f"{fmt(f['mean_predicted']):>6}{extra}")


def _lower(f: dict[str, Any]) -> float | None:
    return f["auroc_ci95"][0] if f.get("auroc_ci95") else None


def _above(f: dict[str, Any]) -> bool:
    low = _lower(f)
    return low is not None and low > 0.5


def verdict(exp: Experiment, figures) -> None:
    """The criterion and the default rule, applied to the figures (stated in CRITERION and DEFAULT_RULE)."""
    learnt_t = _above(figures[CURRENT_DEFAULT][1]["T"])  # iteration 1 is shared by every schedule
    placebo_clean = all(not _above(figures[PLACEBO][i][p]) for i in (1, 2) for p in POSITIONS)
    propagates = {}
    for arm in SCHEDULES:
        two, one = figures[arm][2]["T-1"], figures[arm][1]["T-1"]
        rise = (two["auroc"] - one["auroc"]) if two["auroc"] is not None and one["auroc"] is not None else None
        propagates[arm] = {"lower_bound_above_half": _above(two), "rise": rise,
                           "propagates": _above(two) and rise is not None and rise >= RISE}
    passing = [arm for arm in SCHEDULES if propagates[arm]["propagates"]]
    success = learnt_t and placebo_clean and bool(passing)
    if success:
        best = max(passing, key=lambda a: figures[a][2]["T-1"]["auroc"])
        keep = (CURRENT_DEFAULT in passing and figures[best][2]["T-1"]["auroc"]
                - figures[CURRENT_DEFAULT][2]["T-1"]["auroc"] <= TIE)
        default = CURRENT_DEFAULT if keep else best
    else:
        default = CURRENT_DEFAULT
    moving = [a for a in SCHEDULES if a != CURRENT_DEFAULT]
    expected_shape = (learnt_t and not propagates[CURRENT_DEFAULT]["propagates"]
                      and any(propagates[a]["propagates"] for a in moving))
    exp.say(f"\n(1) T learnt after iteration 1 (95% lower bound > 0.5): {learnt_t} "
            f"(lower bound {fmt(_lower(figures[CURRENT_DEFAULT][1]['T']))})")
    for arm in SCHEDULES:
        p = propagates[arm]
        exp.say(f"(2) {arm:<12}: T-1 after iteration 2 lower bound {fmt(_lower(figures[arm][2]['T-1']))}, rise over "
                f"iteration 1 {fmt(p['rise'], '+.3f')}: propagates {p['propagates']}")
    exp.say(f"(3) placebo's 95% lower bounds all at most 0.5: {placebo_clean}")
    exp.say(f"criterion met: {success}; expected shape (T first, T-1 only with a moving target): {expected_shape}")
    exp.say(f"default schedule by the rule: {default}" + ("" if success else " (unchanged: nothing measured "
                                                                            "supports a change)"))
    if exp.args.quick:
        exp.say("(quick run: a handful of steps; the verdict exercises the code, it measures nothing)")
    exp.result("verdict", {"t_learnt_after_1": learnt_t, "placebo_clean": placebo_clean, "schedules": propagates,
                           "criterion_met": success, "expected_shape": expected_shape, "default_schedule": default})


def _remove_quick_scratch() -> None:
    """A quick run's checkpoints (a dozen copies of the model) go to a temporary folder: remove it."""
    train_dir = Path(os.environ.get("NLAC_TRAIN_DIR", ""))
    if train_dir.parent.name.startswith("nlac-bench-backup-propagation-"):
        shutil.rmtree(train_dir.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
