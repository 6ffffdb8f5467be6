"""critique, backup, refine, build-dataset: the NLAC steps over trajectory files.

Trajectories come from any supported file (our JSONL, tau-bench, tau2-bench,
...); outputs are JSONL, one record per line (``nlac_core.outputs.to_json``),
each naming its step by trajectory content hash and step number.
"""

from __future__ import annotations

import collections
import copy
import json
import sys
from pathlib import Path

from nlac_core import sft_data
from nlac_core.actions import tool_spec_from_schemas
from nlac_core.backends.embedded import ensure_embedded_model
from nlac_core.bellman import BackupConfig, backup_chunks
from nlac_core.commands.common import (
    UsageError,
    add_backend_args,
    backend_from_args,
    progress,
    read_jsonl,
    write_jsonl,
)
from nlac_core.commands.training import add_launch_args, launch_from_args
from nlac_core.critic import CritiqueConfig, critique_chunks
from nlac_core.formats import read
from nlac_core.iteration import IterationConfig, run_iteration
from nlac_core.outputs import from_json, to_json
from nlac_core.records import TrajectoryRecord
from nlac_core.refine import RefineConfig, action_spec_for, refine_steps
from nlac_core.replay import ReplayConfig, read_buffer
from nlac_core.sft_data import StepIndex
from nlac_core.state import StepView, pick_steps
from nlac_core.successor import OUTCOME_TARGETS, transition_of


def load_trajectories(path: str, fmt: str | None, limit: int | None = None) -> list[TrajectoryRecord]:
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    out = []
    for item in read(path, fmt):
        if isinstance(item.record, TrajectoryRecord):
            out.append(item.record)
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise UsageError(f"{path}: no trajectories in the file")
    return out


def select_steps(trajectories: list[TrajectoryRecord], which: str, max_steps: int | None) -> list[StepView]:
    """``all``, ``first``, ``last`` or comma-separated step numbers (negative counts from the end)."""
    if max_steps is not None and max_steps < 1:
        raise UsageError(f"--max-steps must be at least 1, got {max_steps}")
    try:
        chosen = pick_steps(trajectories, which, max_steps)
    except ValueError as exc:
        raise UsageError(f"--steps {exc}") from None
    if not chosen:
        raise UsageError("no agent steps selected")
    return chosen


def _add_input_args(p) -> None:
    p.add_argument("trajectories", help="a trajectory file in any supported format")
    p.add_argument("--format", default=None, help="the trajectory file's format (default: detected)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N trajectories")
    p.add_argument("--steps", default="all", help="all, first, last or step numbers such as 0,3,-1 (default all)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in all")
    p.add_argument("--max-state-chars", type=int, default=2000, help="character budget of a rendered state")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk-size", type=int, default=16, help="steps per batched pass")


def _config(cls, args, **fields):
    try:
        return cls(**fields)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_critique(args) -> int:
    outcome = None
    if args.outcome_calibration:
        from nlac_core.outcome import OutcomeCalibration  # lazy: pulls scikit-learn in; the CLI starts fast

        try:
            outcome = OutcomeCalibration.load(args.outcome_calibration)
        except ValueError as exc:
            raise UsageError(f"--outcome-calibration {exc}") from None
    config = _config(CritiqueConfig, args, k=args.k, mode=args.mode, temperature=args.temperature, seed=args.seed,
                     chunk_size=args.chunk_size, calibrate_verdicts=not args.no_calibration,
                     outcome_calibration=outcome)
    steps = select_steps(load_trajectories(args.trajectories, args.format, args.limit), args.steps, args.max_steps)
    backend = backend_from_args(args)
    transitions = [transition_of(s, None, args.max_state_chars) for s in steps]
    bar = progress(total=len(steps), desc="critique")
    rows = []
    for chunk in critique_chunks(backend, transitions, config, on_progress=lambda done, total: bar.update(
            done - bar.n)):
        rows.extend(to_json(c) for c in chunk)
    bar.close()
    n = write_jsonl(args.out, rows)
    parsed = sum(r["parse_ok"] for r in rows)
    print(f"wrote {n} critiques ({parsed} parsed, {n - parsed} kept as raw text)", file=sys.stderr)
    return 0


def cmd_backup(args) -> int:
    config = _config(BackupConfig, args, next_action=args.next_action, temperature=args.temperature,
                     seed=args.seed, max_state_chars=args.max_state_chars, chunk_size=args.chunk_size)
    steps = select_steps(load_trajectories(args.trajectories, args.format, args.limit), args.steps, args.max_steps)
    policy = backend_from_args(args)
    target = policy if args.target_model is None else backend_from_args(_with_model(args, args.target_model))
    bar = progress(total=len(steps), desc="backup")
    rows = []
    for chunk in backup_chunks(policy, target, steps, config,
                               on_progress=lambda done, total: bar.update(done - bar.n)):
        rows.extend(to_json(t) for t in chunk)
    bar.close()
    n = write_jsonl(args.out, rows)
    terminal = sum(r["terminal"] for r in rows)
    print(f"wrote {n} Bellman targets ({terminal} terminal)", file=sys.stderr)
    return 0


def _with_model(args, model: str):
    other = copy.copy(args)
    other.model = model
    return other


def _read_outputs(path: str, kind: str):
    out = []
    for number, row in read_jsonl(path):
        if row.get("type") != kind:
            raise UsageError(f"{Path(path).name}, line {number}: expected a {kind} record, got {row.get('type')!r}")
        try:
            out.append(from_json(row))
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{Path(path).name}, line {number}: not a valid {kind} record ({exc})") from None
    if not out:
        raise UsageError(f"{path}: no {kind} records")
    return out


def _steps_for(index, records, path: str):
    steps = []
    for n, record in enumerate(records, 1):
        try:
            steps.append(index.step(record.step))
        except (KeyError, IndexError) as exc:
            raise UsageError(f"{Path(path).name}, record {n}: {exc.args[0]}") from None
    return steps


def cmd_refine(args) -> int:

    config = _config(RefineConfig, args, rounds=args.rounds, temperature=args.temperature, seed=args.seed,
                     on_optimal="refine" if args.refine_optimal else "keep")
    if args.chunk_size < 1:
        raise UsageError(f"--chunk-size must be at least 1, got {args.chunk_size}")
    index = StepIndex(load_trajectories(args.trajectories, args.format))
    critiques = _read_outputs(args.critiques, "Critique")
    steps = _steps_for(index, critiques, args.critiques)
    spec_for = action_spec_for
    if args.tools:
        try:
            tool_spec = tool_spec_from_schemas(json.loads(Path(args.tools).read_text()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"--tools {args.tools}: not a list of OpenAI function schemas ({exc})") from None
        spec_for = lambda step: tool_spec  # noqa: E731
    backend = backend_from_args(args)
    rows = []
    bar = progress(total=len(steps), desc="refine")
    for start in range(0, len(steps), args.chunk_size):
        chunk = slice(start, start + args.chunk_size)
        rows.extend(to_json(r) for r in refine_steps(backend, steps[chunk], critiques[chunk], config, spec_for,
                                                       args.max_state_chars))
        bar.update(len(steps[chunk]))
    bar.close()
    n = write_jsonl(args.out, rows)
    valid = sum(r["valid"] for r in rows)
    kept = collections.Counter(r["kept"] for r in rows if r["kept"])
    print(f"wrote {n} refinements ({valid} valid actions): {n - sum(kept.values())} refined, "
          f"{kept['optimal']} kept as judged optimal, {kept['won']} kept as the step that won", file=sys.stderr)
    return 0


def cmd_build_dataset(args) -> int:
    index = sft_data.StepIndex(load_trajectories(args.trajectories, args.format))
    kind = {"successor": "BellmanTarget", "critique": "Critique", "distill": "Refinement"}[args.kind]
    records = _read_outputs(args.inputs, kind)
    _steps_for(index, records, args.inputs)  # every record must name a known step
    if args.kind == "successor":
        rows = sft_data.successor_records(records, index, args.max_state_chars, args.outcome, args.seed)
    elif args.kind == "critique":
        rows = sft_data.critique_records(records, index, require_parsed=not args.include_unparsed,
                                         max_state_chars=args.max_state_chars)
    else:
        rows = sft_data.distillation_records(records, index, only_valid=True, only_changed=args.only_changed)
    if not rows:
        raise UsageError(f"{args.inputs}: no records qualify for a {args.kind} dataset")
    n = write_jsonl(args.out, rows)
    print(f"wrote {n} {args.kind} records (sha256 {sft_data.records_hash(rows)[:16]})", file=sys.stderr)
    return 0


def cmd_iterate(args) -> int:
    from nlac_core.backends.hf import HFBackend  # lazy: torch and transformers

    sft = {}
    if args.sft_config:
        try:
            sft = json.loads(Path(args.sft_config).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"--sft-config {args.sft_config}: not a readable JSON object ({exc})") from None

    replay_config = _config(ReplayConfig, args, size=args.replay_size, fresh_fraction=args.fresh_fraction,
                            seed=args.seed)
    config = _config(IterationConfig, args, env=args.env, split=args.split, eval_split=args.eval_split,
                     tasks=args.tasks, trials=args.trials,
                     max_turns=args.max_turns, seed=args.seed, tau=args.tau, target_schedule=args.target_schedule,
                     target_every=args.target_every, replay=replay_config, sft=sft, outcome_target=args.outcome)
    sources = [*(args.replay or []), *([args.replay_dir] if args.replay_dir and Path(args.replay_dir).is_dir() else [])]
    buffer = read_buffer(sources)
    model = args.model or str(ensure_embedded_model())
    for flag, path in (("--model", model), ("--target-model", args.target_model)):
        if path is not None and not (Path(path) / "config.json").is_file():
            raise UsageError(f"{flag} {path}: not a model directory")
    loaded: dict[str, HFBackend] = {}

    def load(path: str) -> HFBackend:
        if path not in loaded:
            loaded[path] = HFBackend(model=path)
        return loaded[path]

    oracle = load(str(ensure_embedded_model())) if args.env != "math" else None
    result = run_iteration(args.workdir, model, args.target_model or model, config, load, oracle=oracle,
                           on_progress=lambda phase, done, total: print(f"{phase}: {done}/{total}",
                                                                        file=sys.stderr), replay=buffer,
                           launch=launch_from_args(args))
    if args.replay_dir:  # this iteration's rollout joins the buffer of the next ones
        import shutil

        Path(args.replay_dir).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(args.workdir) / "rollout.jsonl",
                        Path(args.replay_dir) / f"{Path(args.workdir).resolve().name}.jsonl")
    print(json.dumps({"checkpoint": str(result.checkpoint), "target": str(result.target),
                      "trajectories": result.trajectories, "steps": result.steps,
                      "transitions": {"fresh": result.fresh_transitions, "replayed": result.replayed_transitions,
                                      "buffer_trajectories": len(buffer)},
                      "rollout": result.rollout_metrics, "dataset": result.dataset_records,
                      "train": result.train_metrics}, indent=2, default=str))
    return 0


def register(sub) -> None:
    p = sub.add_parser("critique", help="successor futures + evaluator critiques for trajectory steps")
    _add_input_args(p)
    p.add_argument("out", help="output JSONL of critiques")
    p.add_argument("--k", type=int, default=1, help="futures sampled per step (k > 1 needs --temperature)")
    p.add_argument("--mode", default="sectioned", choices=("sectioned", "free", "free_zero_shot"))
    p.add_argument("--no-calibration", action="store_true",
                   help="sectioned: take the verdict's raw likelihoods (default: relative to a content-free prompt)")
    p.add_argument("--outcome-calibration", default=None,
                   help="a calibration written by calibrate-outcome: P(success) mapped through it (raw kept)")
    add_backend_args(p)
    p.set_defaults(func=cmd_critique)

    p = sub.add_parser("backup", help="language Bellman targets for the transitions of trajectory steps")
    _add_input_args(p)
    p.add_argument("out", help="output JSONL of Bellman targets")
    p.add_argument("--target-model", default=None, help="the target (EMA) checkpoint (default: --model)")
    p.add_argument("--next-action", default="policy", choices=("policy", "data"),
                   help="a_t+1 sampled from the policy (default) or the recorded one")
    add_backend_args(p)
    p.set_defaults(func=cmd_backup)

    p = sub.add_parser("refine", help="refined actions for critiqued steps")
    p.add_argument("trajectories")
    p.add_argument("critiques", help="JSONL written by the critique command")
    p.add_argument("out")
    p.add_argument("--format", default=None)
    p.add_argument("--rounds", type=int, default=1, help="refinement rounds m (default 1)")
    p.add_argument("--tools", default=None, help="OpenAI function schemas (JSON list) the actions must use")
    p.add_argument("--refine-optimal", action="store_true",
                   help="also rewrite the steps the critique judged optimal (default: they keep their action)")
    p.add_argument("--max-state-chars", type=int, default=2000)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk-size", type=int, default=16)
    add_backend_args(p)
    p.set_defaults(func=cmd_refine)

    p = sub.add_parser("build-dataset", help="SFT records (TRL prompt/completion JSONL) from generated outputs")
    p.add_argument("kind", choices=("successor", "critique", "distill"))
    p.add_argument("inputs", help="JSONL of Bellman targets (successor), critiques or refinements (distill)")
    p.add_argument("out")
    p.add_argument("--trajectories", required=True, help="the trajectory file the inputs refer to")
    p.add_argument("--format", default=None)
    p.add_argument("--max-state-chars", type=int, default=2000)
    p.add_argument("--include-unparsed", action="store_true", help="critique: keep critiques that failed to parse")
    p.add_argument("--only-changed", action="store_true", help="distill: only refinements that changed the action")
    add_outcome_target_args(p)
    p.set_defaults(func=cmd_build_dataset)

    p = sub.add_parser("iterate", help="one NLAC iteration: rollout, backup, critique, refine, train, EMA")
    p.add_argument("--env", required=True, choices=("twenty_questions", "math", "tool_use"))
    p.add_argument("--workdir", required=True, help="where every phase writes its output (re-run to resume)")
    p.add_argument("--model", default=None, help="the current checkpoint (default: the embedded SmolLM2)")
    p.add_argument("--target-model", default=None, help="the EMA target checkpoint (default: --model)")
    p.add_argument("--split", default="", help="the tasks it trains on (default: the environment's train split)")
    p.add_argument("--eval-split", default="",
                   help="the held-out tasks its checkpoints are scored on (default: the environment's test split); "
                        "an overlap with --split is refused")
    p.add_argument("--tasks", type=int, default=4)
    p.add_argument("--trials", type=int, default=1)
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--tau", type=float, default=0.05, help="EMA rate of the target update (polyak schedule)")
    p.add_argument("--target-schedule", default="polyak", choices=("polyak", "hard"),
                   help="polyak: average with --tau each iteration; hard: copy the online weights every "
                        "--target-every iterations")
    p.add_argument("--target-every", type=int, default=1, help="hard schedule: the period in iterations")
    add_outcome_target_args(p, seed=False)
    p.add_argument("--replay", action="append", default=None, metavar="FILE_OR_DIR",
                   help="replay buffer: trajectory files (any format; imported runs) or folders of JSONL (repeatable)")
    p.add_argument("--replay-dir", default=None,
                   help="a folder of earlier iterations' rollouts: read as buffer, and this rollout is added to it")
    p.add_argument("--replay-size", type=int, default=64,
                   help="transitions backed up per iteration, fresh and replayed (0: the fresh rollout's alone)")
    p.add_argument("--fresh-fraction", type=float, default=0.5, help="share of them from the fresh rollout")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sft-config", default=None, help="JSON file of SFT settings (SFTRunConfig fields)")
    add_launch_args(p)  # the SFT phase's processes
    p.set_defaults(func=cmd_iterate)


def add_outcome_target_args(p, seed: bool = True) -> None:
    p.add_argument("--outcome", default="sample", choices=OUTCOME_TARGETS,
                   help="successor records: the OUTCOME word of a Bellman target drawn from its P(success), seeded "
                        "per step (sample), or the likelier word (threshold)")
    if seed:
        p.add_argument("--seed", type=int, default=0, help="the seed of the sampled OUTCOME words")
