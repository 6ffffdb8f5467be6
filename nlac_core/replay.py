"""The replay buffer: NLAC is off-policy, so each iteration backs up transitions drawn from everything stored,
not only its own fresh rollout.

The buffer holds whole trajectories (imported benchmark runs as offline data, earlier iterations' rollouts,
steps people corrected); an iteration draws ``size`` transitions: about ``fresh_fraction`` of them from its
fresh rollout, the rest from the buffer, each side sampled with a seeded generator, and a side that runs short
filled from the other. Only trajectories of the iteration's environment are drawn (``compatible``): a 20
Questions policy has nothing to learn from an airline booking. The draw is a pure function of its inputs, so a
resumed iteration draws the same transitions.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nlac_core.formats import read
from nlac_core.records import TrajectoryRecord
from nlac_core.state import StepView, steps_of


@dataclass(frozen=True)
class ReplayConfig:
    """``size``: transitions backed up per iteration (0: the fresh rollout's alone, every step of it)."""

    size: int = 64
    fresh_fraction: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise ValueError(f"replay size must be an integer of 0 or more, got {self.size!r}")
        if not 0.0 <= self.fresh_fraction <= 1.0:
            raise ValueError(f"fresh_fraction must be in [0, 1], got {self.fresh_fraction}")


@dataclass(frozen=True)
class Draw:
    """The transitions an iteration backs up: ``fresh`` from its rollout, then ``replayed`` from the buffer."""

    fresh: list[StepView]
    replayed: list[StepView]

    @property
    def steps(self) -> list[StepView]:
        return [*self.fresh, *self.replayed]


def compatible(trajectory: TrajectoryRecord, env: str) -> bool:
    """A stored trajectory an iteration on ``env`` can learn from: one of that environment's, or, for tool use,
    an imported run (imported files carry no ``env``: tau-bench, tau2-bench, OpenAI chat logs)."""
    own = trajectory.meta.get("env")
    return own == env or (env == "tool_use" and own is None)


def draw(fresh: Sequence[TrajectoryRecord], buffer: Iterable[TrajectoryRecord], env: str, config: ReplayConfig,
         ) -> Draw:
    """The iteration's transitions (see the module docstring). Buffer trajectories that are also in the fresh
    rollout (same content hash) are not drawn twice."""
    fresh_steps = [s for t in fresh for s in steps_of(t)]
    if config.size == 0:
        return Draw(fresh_steps, [])
    seen = {t.content_hash() for t in fresh}
    old_steps = [s for t in buffer if compatible(t, env) and t.content_hash() not in seen for s in steps_of(t)]
    want_fresh = round(config.size * config.fresh_fraction)
    take_fresh = min(len(fresh_steps), want_fresh)
    take_old = min(len(old_steps), config.size - take_fresh)
    take_fresh = min(len(fresh_steps), config.size - take_old)  # the buffer ran short: more fresh ones
    rng = random.Random(config.seed)
    return Draw(_sample(fresh_steps, take_fresh, rng), _sample(old_steps, take_old, rng))


def draw_trajectories(fresh_steps: int, candidates: Sequence[tuple[int, int]], config: ReplayConfig) -> list[int]:
    """The same draw for a caller that selects whole stored trajectories (the web app's child jobs): ids of
    ``candidates`` ((id, number of steps), compatible ones only, the fresh rollout left out) taken in a seeded
    order until their steps cover the buffer's share of ``size``; sorted."""
    if config.size == 0:
        return []
    want_old = config.size - min(fresh_steps, round(config.size * config.fresh_fraction))
    order = sorted(candidates)
    random.Random(config.seed).shuffle(order)
    chosen, steps = [], 0
    for pk, n in order:
        if steps >= want_old:
            break
        if n > 0:
            chosen.append(pk)
            steps += n
    return sorted(chosen)


def _sample(steps: list[StepView], n: int, rng: random.Random) -> list[StepView]:
    """``n`` steps in their stored order (all of them when n covers them)."""
    if n >= len(steps):
        return list(steps)
    chosen = sorted(rng.sample(range(len(steps)), n))
    return [steps[i] for i in chosen]


def read_buffer(paths: Iterable[str | Path]) -> list[TrajectoryRecord]:
    """Trajectories of replay files (any importable format) and folders of them (``*.jsonl``, sorted)."""
    out: list[TrajectoryRecord] = []
    for path in paths:
        path = Path(path)
        files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            out.extend(i.record for i in read(file) if isinstance(i.record, TrajectoryRecord))
    return out
