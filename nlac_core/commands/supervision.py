"""first-errors (no model) and judge: the runtime critic's supervision from recorded runs.

first-errors: where the failed episodes of a run first leave the gold path. judge: a runtime critic checks each
recorded action offline and the intervention rate is printed, calibrated or not (``--no-calibration``).

The runtime critic's supervision from recorded runs (the asymmetric actor-critic's data pipeline,
``nlac_core.critic_data``): any trajectory file whose tasks carry gold actions (tau-bench's ``task.actions``,
tau2-bench's ``evaluation_criteria``, our rollouts of the tool-use environment).
"""

from __future__ import annotations

import dataclasses

from nlac_core.commands.algorithm import load_trajectories, select_steps
from nlac_core.commands.common import UsageError, add_backend_args, backend_from_args, write_jsonl
from nlac_core.commands.formats import trajectories
from nlac_core.critic_data import first_error, gold_actions, hard_tasks, runtime_labels
from nlac_core.evaluation import is_success
from nlac_core.outputs import to_json
from nlac_core.supervision import SupervisionConfig, judge_recorded


def cmd_first_errors(args) -> int:
    if args.approve_ratio < 0:
        raise UsageError(f"--approve-ratio must be 0 or more, got {args.approve_ratio}")
    episodes = list(trajectories(args.file, args.format))
    failed = [t for t in episodes if t.reward is not None and not is_success(t)]
    graded = [t for t in failed if gold_actions(t.task)]
    errors = [(t, first_error(t, args.at_turn_cap)) for t in failed]
    placed = [(t, e) for t, e in errors if e is not None]
    print(f"localised {len(placed)} of {len(failed)} failed episodes"
          f" ({len(failed) - len(graded)} without gold actions; {len(episodes)} episodes in all)")
    if args.verbose:
        for t, e in placed:
            print(f"  task {t.task.external_id} trial {t.trial}: step {e.step_index}: {e.reason}")
    if args.out:
        labels = runtime_labels(episodes, hard_tasks(episodes), approve_ratio=args.approve_ratio, seed=args.seed,
                                at_turn_cap=args.at_turn_cap)
        n = write_jsonl(args.out, (dataclasses.asdict(label) for label in labels))
        interventions = sum(label.decision == "intervene" for label in labels)
        print(f"wrote {n} labels ({interventions} intervene, {n - interventions} approve) to {args.out}")
    return 0


def cmd_judge(args) -> int:
    try:
        config = SupervisionConfig(where=args.where, feedback_tokens=args.feedback_tokens,
                                   max_state_chars=args.max_state_chars, calibrate=not args.no_calibration)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    steps = select_steps(load_trajectories(args.trajectories, args.format, args.limit), args.steps, args.max_steps)
    critiques = judge_recorded(backend_from_args(args), steps, config)
    stopped = sum(c.decision == "intervene" for c in critiques)
    how = "calibrated (content-free)" if config.calibrate else "raw likelihood"
    rate = f"{stopped / len(critiques):.1%}" if critiques else "undefined (nothing judged)"
    print(f"intervened on {stopped} of {len(critiques)} recorded actions: {rate}, {how}")
    if args.out:
        write_jsonl(args.out, (to_json(c) for c in critiques))
    return 0


def register(sub) -> None:
    p = sub.add_parser("first-errors", help="localise the first wrong action of each failed episode (gold actions)")
    p.add_argument("file", help="a trajectory file whose tasks carry gold actions (tau-bench, tau2-bench, our JSONL)")
    p.add_argument("--format", default=None, help="the file's format (default: detected)")
    p.add_argument("--out", default=None, help="write the runtime critic's approve / intervene labels as JSONL")
    p.add_argument("--approve-ratio", type=float, default=1.0, help="approvals kept per intervention (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the approvals' balancing sample (default 0)")
    p.add_argument("--at-turn-cap", action="store_true",
                   help="also place the error of an episode cut at its turn cap at its last step (a weaker label)")
    p.add_argument("--verbose", action="store_true", help="print each placed error")
    p.set_defaults(func=cmd_first_errors)

    p = sub.add_parser("judge", help="a runtime critic checks each recorded action offline (intervention rate)")
    p.add_argument("trajectories", help="a trajectory file in any supported format")
    p.add_argument("--format", default=None, help="the trajectory file's format (default: detected)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N trajectories")
    p.add_argument("--steps", default="all", help="all, first, last or step numbers such as 0,3,-1 (default all)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in all")
    p.add_argument("--max-state-chars", type=int, default=2000, help="character budget of a rendered history")
    p.add_argument("--where", default="all", help="all actions, or only state_changing tool calls")
    p.add_argument("--feedback-tokens", type=int, default=64)
    p.add_argument("--no-calibration", action="store_true",
                   help="choose approve/intervene by raw likelihood (default: relative to a content-free prompt)")
    p.add_argument("--out", default=None, help="write the checks as critique JSONL (mode runtime)")
    add_backend_args(p, what="critic")
    p.set_defaults(func=cmd_judge)
