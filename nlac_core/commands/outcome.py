"""calibrate-outcome: fit the successor's P(success) to real outcomes, and report how honest it is.

The steps of the file are split by task into a fit half and a held-out half; the successor predicts each step's
future and P(success) once; a Platt scaling is fitted on the fit half; the held-out half is reported raw and
calibrated (``nlac_core.outcome.outcome_report``). ``critique --outcome-calibration FILE`` applies it.
"""

from __future__ import annotations

import json

from nlac_core.commands.algorithm import load_trajectories, select_steps
from nlac_core.commands.common import UsageError, add_backend_args, backend_from_args
from nlac_core.critic import CritiqueConfig
from nlac_core.evaluation import is_success
from nlac_core.outcome import Scored, fit_platt, outcome_report, split_by_task
from nlac_core.prompts.nlac import SUCCESSOR
from nlac_core.successor import predict_futures, transition_of


def cmd_calibrate_outcome(args) -> int:
    steps = [s for s in select_steps(load_trajectories(args.trajectories, args.format, args.limit), args.steps,
                                     args.max_steps) if s.trajectory.reward is not None]
    if not 0 < args.held_out < 1:
        raise UsageError(f"--held-out must be between 0 and 1, got {args.held_out}")
    backend = backend_from_args(args)
    futures = predict_futures(backend, [transition_of(s, None, args.max_state_chars) for s in steps],
                              CritiqueConfig().spec(args.future_tokens))
    scored = [Scored(s.trajectory.task.external_id, f[0].success_prob, is_success(s.trajectory))
              for s, f in zip(steps, futures, strict=True) if f[0].success_prob is not None]
    fit, held = split_by_task(scored, args.held_out, args.seed)
    try:
        platt = fit_platt(fit, fitted_on=f"{args.trajectories} (fit half, seed {args.seed})", model=backend.model,
                          prompt_id=SUCCESSOR.prompt_id)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    raw = outcome_report(held, seed=args.seed)
    calibrated = outcome_report([Scored(i.task, platt.apply(i.prob), i.success) for i in held], seed=args.seed)
    print(f"{len(steps)} steps of {len({s.trajectory.task.external_id for s in steps})} tasks: fit on {len(fit)} "
          f"({platt.positives} of won episodes), held out {len(held)} of {raw['tasks']} other tasks")
    print(f"calibration {platt.id}: p' = sigmoid({platt.a:.3f} * logit(p) + {platt.b:.3f})")
    for name, report in (("raw", raw), ("calibrated", calibrated)):
        print(f"  {name:<11}" + _line(report))
        for flag in report["flags"]:
            print(f"  {'':<11}flag: {flag}")
    platt.save(args.out)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            json.dump({"calibration": platt.to_dict(), "held_out": {"raw": raw, "calibrated": calibrated}}, fh,
                      indent=2)
    print(f"wrote {args.out}")
    return 0


def _line(r) -> str:
    def f(x, spec=".2f"):
        return "n/a" if x is None else format(x, spec)

    ci = r["auroc_ci95"]
    return (f"mean P(success) {f(r['mean_predicted'])} vs success rate {f(r['success_rate'])}; "
            f"AUROC {f(r['auroc'])}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "") +
            f"; Brier {f(r['brier'], '.3f')} (base rate {f(r['base_rate_brier'], '.3f')}); ECE {f(r['ece'], '.3f')}")


def register(sub) -> None:
    p = sub.add_parser("calibrate-outcome", help="fit the successor's P(success) to real outcomes; report AUROC, "
                                                 "reliability and flags on held-out tasks")
    p.add_argument("trajectories", help="a trajectory file with rewards (tau-bench, tau2-bench, our JSONL)")
    p.add_argument("--out", required=True, help="where to write the calibration (JSON)")
    p.add_argument("--report", default=None, help="also write the held-out report (JSON)")
    p.add_argument("--format", default=None)
    p.add_argument("--limit", type=int, default=None, help="use only the first N trajectories")
    p.add_argument("--steps", default="all", help="all, first, last or step numbers such as 0,3,-1 (default all)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in all")
    p.add_argument("--held-out", type=float, default=0.5, help="share of tasks held out to report on (default 0.5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the task split and the bootstrap")
    p.add_argument("--max-state-chars", type=int, default=1500)
    p.add_argument("--future-tokens", type=int, default=64)
    add_backend_args(p, what="successor")
    p.set_defaults(func=cmd_calibrate_outcome)
