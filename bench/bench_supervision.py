"""Runtime-critic figures on the tool-use environment with the embedded model, through the real jobs.

    python bench/bench_supervision.py                       # the three phases below, defaults as reported
    python bench/bench_supervision.py --tasks 4 --trials 1  # a quick look

1. supervised-rollout, actor = critic = SmolLM2-135M-Instruct (the simulated user is the same model, as in
   every rollout job): the test tasks x trials with and without the critic (same tasks and seeds), then the
   counterfactual re-runs (every intervened step without its intervention, a sample of approved steps with a
   forced one). Figures: intervention rate, success and pass^k of each arm, recovery / disruption / break-even,
   helpfulness / harmfulness.
2. critic-data on the training tasks: self-play k times per task, hard tasks, first errors by gold actions
   (``at_turn_cap``: SmolLM2-135M writes no tool call, so its errors are placed at the turn cap), targets,
   a runtime-critic snapshot, and the train-critic job on it (SFT of SmolLM2 as the critic).
3. supervised-rollout again with the fine-tuned critic checkpoint on the same test tasks and seeds.

Jobs run in this process (``runners.base.execute``, no broker) against a bench SQLite file (or DATABASE_URL).
Small-model numbers are expected to be low: the point is that the machinery measures them honestly.
"""

from __future__ import annotations

import argparse
import json
import time

from _setup import ROOT, django_with

DB_FILE = ROOT / "var" / "bench-supervision.sqlite3"


def run(kind: str, config: dict, label: str) -> tuple[dict, float]:
    from webapp.jobs.models import Job
    from webapp.jobs.runners.base import execute
    from webapp.jobs.services import lifecycle

    job = lifecycle.check_create_job(None, kind, config)
    started = time.monotonic()
    status = execute(job.pk, "bench:1")
    elapsed = time.monotonic() - started
    job = Job.objects.get(pk=job.pk)
    if status != Job.SUCCEEDED:
        raise SystemExit(f"{label}: job {job.pk} {status}: {job.error}\n{job.traceback}")
    print(f"\n== {label}: job {job.pk}, {elapsed:.0f} s", flush=True)
    return job.outputs, elapsed


def pct(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def report(outputs: dict, elapsed: float) -> None:
    episodes = outputs["episodes"]
    played = sum(episodes.values())
    print(f"episodes: baseline {episodes['baseline']}, supervised {episodes['supervised']}, counterfactual "
          f"{episodes['counterfactual']} ({played / elapsed * 60:.1f} episodes/min)")
    i = outputs["interventions"]
    print(f"intervention rate: {i['interventions']} / {i['checks']} checks = {pct(i['rate'])} "
          f"({i['per_episode'] or 0:.2f} per episode)")
    for arm in ("baseline", "supervised"):
        m = outputs.get(arm)
        if m:
            print(f"{arm:>10}: success {pct(m['success_rate'])}, mean reward {m['mean_reward']:.3f}, "
                  f"pass^k {json.dumps(m['pass_hat_k'])}, mean turns {m['mean_turns']:.1f}")
    a = outputs.get("arms")
    if a:
        print(f"paired episodes {a['pairs']}: recovery r = {pct(a['recovery'])}, "
              f"disruption d = {pct(a['disruption'])}, baseline failure rate p = {pct(a['baseline_failure_rate'])}, "
              f"break-even d/(r+d) = "
              f"{pct(a['break_even'])}, intervening pays: {a['intervening_pays']}")
    c = outputs["counterfactual"]
    print(f"counterfactuals: {c['without']} intervened steps re-run without, {c['forced']} approved steps with a "
          f"forced intervention; helpfulness {pct(c['helpfulness'])} of {c['would_fail']} would-fail, "
          f"harmfulness {pct(c['harmfulness'])} of {c['would_succeed']} would-succeed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--split", default="synthetic_test")
    parser.add_argument("--train-split", default="synthetic_train")
    parser.add_argument("--train-tasks", type=int, default=20)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--forced-sample", type=int, default=10)
    parser.add_argument("--train-steps", type=int, default=40)
    parser.add_argument("--skip-pipeline", action="store_true", help="phase 1 only")
    parser.add_argument("--skip-first", action="store_true", help="phases 2 and 3 only (phase 1 measured before)")
    parser.add_argument("--critic-checkpoint", default=None,
                        help="phase 3 only, with this fine-tuned critic (a checkpoint phase 2 produced before)")
    parser.add_argument("--db", default=None, help="DATABASE_URL (default: a fresh bench SQLite file)")
    args = parser.parse_args()
    if args.db is None and not args.critic_checkpoint:  # phase 3 alone reuses the bench file and its checkpoint
        DB_FILE.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            DB_FILE.with_name(DB_FILE.name + suffix).unlink(missing_ok=True)
    django_with(args.db or f"sqlite:///{DB_FILE}")
    from webapp.jobs.services import lifecycle

    lifecycle.enqueue = lambda job: None  # jobs run here, one after the other; no broker
    common = {"env": "tool_use", "split": args.split, "tasks": args.tasks, "trials": args.trials,
              "max_turns": args.max_turns, "max_new_tokens": 96, "temperature": 0.7, "seed": 0, "max_rounds": 1,
              "max_interventions": 2, "feedback_tokens": 32, "forced_sample": args.forced_sample, "batch_size": 16}
    print(f"tool_use {args.split}: {args.tasks} tasks x {args.trials} trials, max {args.max_turns} turns, "
          f"R=1, I=2, every action checked; 2 CPU cores")
    if args.critic_checkpoint:
        outputs, elapsed = run("supervised-rollout", {**common, "critic_checkpoint": args.critic_checkpoint,
                                                      "project": "bench: fine-tuned critic"},
                               "3. actor = SmolLM2, critic = the fine-tuned checkpoint")
        report(outputs, elapsed)
        return
    if not args.skip_first:
        outputs, elapsed = run("supervised-rollout", {**common, "project": "bench: critic = SmolLM2"},
                               "1. actor = critic = SmolLM2-135M-Instruct")
        report(outputs, elapsed)
    if args.skip_pipeline:
        return
    data, elapsed = run("critic-data", {"split": args.train_split, "tasks": args.train_tasks, "k": args.k,
                                        "max_turns": args.max_turns, "max_new_tokens": 96, "temperature": 0.7,
                                        "seed": 0, "approve_ratio": 1.0, "train_max_steps": args.train_steps,
                                        "at_turn_cap": True,  # SmolLM2's errors are never a wrong tool call
                                        "learning_rate": 5e-5, "project": "bench: critic data",
                                        "dataset": "bench runtime critic"},
                        f"2. critic data: {args.train_split} {args.train_tasks} tasks x k={args.k}")
    print(f"self-play episodes {data['episodes']}; tasks {json.dumps(data['tasks'])}; targets "
          f"{json.dumps(data['targets'])}; unlocalised failed episodes {data['unlocalised_episodes']}; snapshot "
          f"{data.get('snapshot')} with {data.get('records')} records")
    if not data.get("train_job"):
        raise SystemExit("no targets, so no critic to train: the self-play gave no localisable first error")
    from webapp.jobs.models import Job
    from webapp.jobs.runners.base import execute

    started = time.monotonic()
    assert execute(data["train_job"], "bench:1") == Job.SUCCEEDED, Job.objects.get(pk=data["train_job"]).error
    train = Job.objects.get(pk=data["train_job"])
    loss = train.metrics[-1].get("loss") if train.metrics else None
    print(f"train-critic job {train.pk}: {time.monotonic() - started:.0f} s, checkpoint "
          f"{train.outputs['checkpoint_produced']}, final loss {loss}")
    outputs, elapsed = run("supervised-rollout", {**common, "critic_checkpoint": train.outputs["checkpoint_produced"],
                                                  "project": "bench: fine-tuned critic"},
                           "3. actor = SmolLM2, critic = the fine-tuned checkpoint")
    report(outputs, elapsed)


if __name__ == "__main__":
    main()
