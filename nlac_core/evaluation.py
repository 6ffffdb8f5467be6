"""Metrics of a set of episodes, and ``evaluate`` = rollout + metrics.

Success is what the environment says it is (``reward_info["success"]``: the
word named in 20 Questions, the right answer in MATH, reward 1 in tool use),
falling back to reward >= 1 for trajectories from elsewhere; in 20 Questions
it is the winrate. pass^k is tau-bench's (``metrics.pass_hat_ks``) over each
task's n trials and c successes. Turns are agent steps. Trajectories without
a reward (a harness error, an import without one) are counted but left out of
every mean.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nlac_core.backends.base import Backend, SamplingSpec
from nlac_core.envs.base import Environment
from nlac_core.metrics import pass_hat_ks
from nlac_core.records import TrajectoryRecord
from nlac_core.rollout import ProgressFn, rollout


def is_success(trajectory: TrajectoryRecord) -> bool:
    info = trajectory.reward_info or {}
    if isinstance(info.get("success"), bool):
        return info["success"]
    return trajectory.success


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class EvalResult:
    """What an evaluation found. ``trajectories`` are kept for the caller, not serialised by ``to_dict``."""

    env: str
    n_tasks: int
    n_episodes: int
    n_scored: int
    success_rate: float | None
    mean_reward: float | None
    pass_hat_k: dict[int, float]
    mean_turns: float | None
    invalid_action_rate: float | None
    termination_reasons: dict[str, int]
    seconds: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    trajectories: tuple[TrajectoryRecord, ...] = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env, "n_tasks": self.n_tasks, "n_episodes": self.n_episodes, "n_scored": self.n_scored,
            "success_rate": self.success_rate, "mean_reward": self.mean_reward,
            "pass_hat_k": {str(k): v for k, v in self.pass_hat_k.items()}, "mean_turns": self.mean_turns,
            "invalid_action_rate": self.invalid_action_rate, "termination_reasons": dict(self.termination_reasons),
            "seconds": self.seconds, "meta": dict(self.meta),
        }

    def summary(self) -> str:
        """A few human-readable lines (the CLI prints them)."""
        def fmt(value: float | None, digits: int = 3) -> str:
            return "n/a" if value is None else f"{value:.{digits}f}"

        label = "winrate" if self.env == "twenty_questions" else "success rate"
        lines = [
            f"env: {self.env}  tasks: {self.n_tasks}  episodes: {self.n_episodes}  scored: {self.n_scored}",
            f"{label}: {fmt(self.success_rate)}  mean reward: {fmt(self.mean_reward)}  "
            f"mean turns: {fmt(self.mean_turns, 2)}  invalid actions: {fmt(self.invalid_action_rate)}",
        ]
        if self.pass_hat_k:
            lines.append("pass^k: " + "  ".join(f"k={k} {v:.3f}" for k, v in sorted(self.pass_hat_k.items())))
        if self.termination_reasons:
            lines.append("endings: " + ", ".join(f"{k or '(none)'} {v}" for k, v in
                                                   sorted(self.termination_reasons.items())))
        if self.seconds is not None:
            lines.append(f"time: {self.seconds:.1f} s")
        return "\n".join(lines)


def compute_metrics(trajectories: Iterable[TrajectoryRecord], env: str = "", seconds: float | None = None,
                    meta: dict[str, Any] | None = None) -> EvalResult:
    """Metrics of finished episodes (from a rollout or an import)."""
    records = tuple(trajectories)
    scored = [t for t in records if t.reward is not None]
    per_task: dict[str, list[bool]] = {}
    for t in scored:
        per_task.setdefault(t.task.external_id, []).append(is_success(t))
    steps = [m for t in scored for m in t.messages if m.role == "assistant" and not m.meta.get("scripted")]
    invalid = [m for m in steps if m.meta.get("action_error")]
    return EvalResult(
        env=env or next((str(t.meta.get("env")) for t in records if t.meta.get("env")), ""),
        n_tasks=len({t.task.external_id for t in records}),
        n_episodes=len(records),
        n_scored=len(scored),
        success_rate=_mean([1.0 if is_success(t) else 0.0 for t in scored]),
        mean_reward=_mean([float(t.reward) for t in scored if t.reward is not None]),
        pass_hat_k=pass_hat_ks([(len(v), sum(v)) for v in per_task.values()]),
        mean_turns=_mean([float(t.meta.get("turns", len(t.steps))) for t in scored]),
        invalid_action_rate=(len(invalid) / len(steps)) if steps else None,
        termination_reasons=dict(Counter(t.termination_reason for t in records)),
        seconds=seconds,
        meta=dict(meta or {}),
        trajectories=records,
    )


def evaluate(env: Environment, backend: Backend, split: str = "", limit: int | None = None, trials: int = 1,
             spec: SamplingSpec | None = None, *, max_turns: int | None = None, source_model: str | None = None,
             source_checkpoint: str = "", progress: ProgressFn | None = None,
             should_stop: Callable[[], bool] | None = None,
             on_trajectory: Callable[[TrajectoryRecord], None] | None = None) -> EvalResult:
    """Roll the policy out on a split's first ``limit`` tasks, ``trials`` times each, and measure it."""
    tasks = env.tasks(split, limit)
    started = time.perf_counter()
    trajectories = rollout(env, backend, tasks, trials=trials, spec=spec, max_turns=max_turns,
                           source_model=source_model, source_checkpoint=source_checkpoint, progress=progress,
                           should_stop=should_stop, on_trajectory=on_trajectory)
    seconds = time.perf_counter() - started
    sampling = trajectories[0].meta.get("sampling") if trajectories else (spec.to_dict() if spec else None)
    return compute_metrics(trajectories, env.name, seconds,
                           {"split": split, "limit": limit, "trials": trials, "model": source_model or backend.model,
                            "checkpoint": source_checkpoint, "sampling": sampling,
                            "policy_prompt_id": env.policy_template.prompt_id,
                            "complete": len(trajectories) == len(tasks) * trials})
