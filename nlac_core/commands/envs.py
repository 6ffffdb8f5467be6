"""rollout, evaluate: a policy plays an environment (20 Questions, MATH500, tau2 mock tool use).

    python -m nlac_core rollout --env twenty_questions --tasks 20 --trials 2 --out runs/20q.jsonl
    python -m nlac_core evaluate --env math --tasks 50 --max-new-tokens 384 --json runs/math.json

Arguments are checked, and the tasks listed, before any model is loaded, so a
bad argument fails in a second. The environment's own LLM (the 20 Questions
oracle, the tool-use simulated user) is ``--oracle-*``; left unset it is the
embedded model, the same loaded instance as the policy when both are.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from nlac_core.commands.common import (
    UsageError,
    add_backend_args,
    add_sampling_args,
    backend_from_args,
    progress,
    sampling_from_args,
)
from nlac_core.envs import ENV_NAMES, EnvError, make_env, needs_oracle
from nlac_core.evaluation import compute_metrics
from nlac_core.rollout import TrajectoryWriter, rollout

DATA_OPTION = {"twenty_questions": "words_path", "math": "problems_path", "tool_use": "domain_dir"}
ORACLE_MODES = ("auto", "generate")


class _DeferredBackend:
    """A backend loaded on first use: the environment can list its tasks before the model loads."""

    def __init__(self, load) -> None:
        self._load = load
        self._backend = None

    def _get(self):
        if self._backend is None:
            self._backend = self._load()
        return self._backend

    @property
    def name(self) -> str:
        return self._get().name

    @property
    def model(self) -> str:
        return self._get().model

    def generate(self, requests, spec):
        return self._get().generate(requests, spec)

    def loglikelihood(self, requests):
        return self._get().loglikelihood(requests)


def _positive(args, name: str) -> None:
    value = getattr(args, name.replace("-", "_"))
    if value is not None and value < 1:
        raise UsageError(f"--{name} must be at least 1, got {value}")


def _with_batch_size(backend, batch_size: int):
    """Apply ``--batch-size`` (requests per device batch) to a backend that has one (hf)."""
    if batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {batch_size}")
    if hasattr(backend, "batch_size"):
        backend.batch_size = batch_size
    return backend


def _same_backend(args) -> bool:
    return all(getattr(args, k) == getattr(args, f"oracle_{k}") for k in ("backend", "model", "base_url", "device"))


def _setup(args):
    """(environment, policy backend, tasks, sampling spec) from the arguments; models load last."""
    for name in ("tasks", "trials", "max-turns", "max-new-tokens"):
        _positive(args, name)
    kwargs = {}
    if args.data:
        kwargs[DATA_OPTION[args.env]] = args.data
    policy_holder: dict = {}

    def load_policy():
        if "backend" not in policy_holder:
            policy_holder["backend"] = _with_batch_size(backend_from_args(args), args.batch_size)
        return policy_holder["backend"]

    oracle = None
    if needs_oracle(args.env):
        def load_oracle():
            return _with_batch_size(backend_from_args(args, "oracle-"), args.batch_size)

        oracle = _DeferredBackend(load_policy if _same_backend(args) else load_oracle)
        if args.env == "twenty_questions":
            kwargs["score_answers"] = args.oracle_mode == "auto"
    try:
        env = make_env(args.env, oracle=oracle, **kwargs)
        tasks = env.tasks(args.split or "", args.tasks)
    except EnvError as exc:
        raise UsageError(str(exc)) from None
    if not tasks:
        raise UsageError(f"--split {args.split}: no tasks")
    spec = sampling_from_args(args, max_new_tokens=args.max_new_tokens or env.default_max_new_tokens)
    return env, load_policy(), tasks, spec


def _run(args, env, policy, tasks, spec, on_trajectory):
    bar = progress(total=len(tasks) * args.trials, desc=f"{args.env} episodes")

    def report(done: int, total: int) -> None:
        bar.n = done
        bar.refresh()

    started = time.perf_counter()
    try:
        trajectories = rollout(env, policy, tasks, trials=args.trials, spec=spec, max_turns=args.max_turns,
                               source_checkpoint=args.checkpoint or "", progress=report,
                               on_trajectory=on_trajectory)
    except EnvError as exc:
        raise UsageError(str(exc)) from None
    finally:
        bar.close()
    return compute_metrics(trajectories, env.name, time.perf_counter() - started,
                           {"split": args.split or "", "tasks": len(tasks), "trials": args.trials,
                            "model": policy.model, "sampling": spec.to_dict(),
                            "policy_prompt_id": env.policy_template.prompt_id})


def cmd_rollout(args) -> int:
    env, policy, tasks, spec = _setup(args)
    with TrajectoryWriter(args.out) as writer:
        result = _run(args, env, policy, tasks, spec, writer.write)
    print(f"wrote {writer.count} trajectories to {args.out}", file=sys.stderr)
    print(result.summary(), file=sys.stderr)
    return 0


def cmd_evaluate(args) -> int:
    env, policy, tasks, spec = _setup(args)
    if args.out:
        with TrajectoryWriter(args.out) as writer:
            result = _run(args, env, policy, tasks, spec, writer.write)
        print(f"wrote {writer.count} trajectories to {args.out}", file=sys.stderr)
    else:
        result = _run(args, env, policy, tasks, spec, None)
    print(result.summary())
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
        print(f"wrote metrics to {args.json}", file=sys.stderr)
    return 0


def _add_common(p) -> None:
    p.add_argument("--env", required=True, choices=ENV_NAMES, help="the environment")
    p.add_argument("--tasks", type=int, default=None, help="the first N tasks of the split (default: all)")
    p.add_argument("--trials", type=int, default=1, help="episodes per task (default 1)")
    p.add_argument("--split", default=None,
                   help="twenty_questions: all|train|test (all); math: test; tool_use: graded|base|all (graded)")
    p.add_argument("--max-turns", type=int, default=None,
                   help="cap on agent steps per episode, below the environment's own (20 questions, 20 tool-use turns)")
    p.add_argument("--data", default=None,
                   help="the environment's data: word list JSON, MATH500 JSONL, or the tau2 mock domain folder "
                        "(default: under ../shared/data or NLAC_SHARED_DATA)")
    p.add_argument("--checkpoint", default=None, help="checkpoint label stored on the trajectories")
    add_backend_args(p, what="policy model")
    add_sampling_args(p, max_new_tokens=None)
    add_backend_args(p, prefix="oracle-", what="environment's LLM (20 Questions oracle, tool-use simulated user)")
    p.add_argument("--oracle-mode", choices=ORACLE_MODES, default="auto",
                   help="20 Questions: auto scores Yes./No. by log-likelihood where the backend can; "
                        "generate always generates and parses")


def register(sub) -> None:
    p = sub.add_parser("rollout", help="play an environment with a policy; write the episodes as JSONL")
    _add_common(p)
    p.add_argument("--out", required=True, help="output JSONL of trajectories")
    p.set_defaults(func=cmd_rollout)
    p = sub.add_parser("evaluate", help="play an environment and print success rate, reward, pass^k, turns")
    _add_common(p)
    p.add_argument("--out", default=None, help="also write the trajectories to this JSONL")
    p.add_argument("--json", default=None, help="write the metrics to this JSON file")
    p.set_defaults(func=cmd_evaluate)
