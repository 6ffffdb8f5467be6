"""Rollouts: a policy plays N tasks x k trials of an environment, all episodes side by side.

Every turn, the policy prompts of all live episodes go to the backend in one
``generate`` call, and the environment's own LLM calls (oracle, simulated
user) of that turn in one call per round (see ``nlac_core.envs.base``).
Finished episodes drop out of the batch; the rollout ends when none is live.

Seeds are derived, never drawn: trial ``j`` of task ``t`` has the seed
``derive_seed(seed, t, j)`` and its turn ``n`` is sampled with
``derive_seed(trial_seed, "turn", n)``. Backends that take a seed per row
(``generate(..., row_seeds=...)``, as the hf backend does) get these, so a
trial samples the same text alone or in any batch, and k trials of a task
differ by their seeds. Other backends take one seed per call: each turn's call
then gets ``derive_seed(seed, "turn", n)``, the same rollout still gives the
same trajectories, but a trial's text depends on its batch mates. Each
trajectory records its seeds (``meta.trial_seed``, ``meta.turn_seeds``,
``meta.seeding``).

Cancellation is cooperative: ``should_stop()`` is asked before every turn,
and a stopped rollout returns only the episodes that finished (unfinished
ones are dropped, never stored half-played).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO

from nlac_core.backends.base import Backend, SamplingSpec
from nlac_core.envs.base import EnvError, Environment
from nlac_core.formats import nlac_jsonl
from nlac_core.records import TaskRecord, TrajectoryRecord

ProgressFn = Callable[[int, int], None]


def derive_seed(seed: int | None, *parts: object) -> int | None:
    """A 31-bit seed from a base seed and labels; None stays None (unseeded)."""
    if seed is None:
        return None
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def rollout(env: Environment, policy: Backend, tasks: Sequence[TaskRecord], *, trials: int = 1,
            spec: SamplingSpec | None = None, max_turns: int | None = None, source_model: str | None = None,
            source_checkpoint: str = "", progress: ProgressFn | None = None,
            should_stop: Callable[[], bool] | None = None,
            on_trajectory: Callable[[TrajectoryRecord], None] | None = None,
            skip: Collection[tuple[str, int]] = (), supervisor=None) -> list[TrajectoryRecord]:
    """Play every task ``trials`` times; the finished episodes as TrajectoryRecords, in task then trial order.

    ``env`` is a template slot (its siblings are spawned); ``spec`` defaults to the
    environment's usual token budget, greedy; ``max_turns`` caps agent steps below the
    environment's own cap; ``progress(done, total)`` is called as episodes finish;
    ``on_trajectory`` receives each one when it finishes (to store it at once); ``skip`` names
    (task external_id, trial) slots not to play (a resumed job's finished episodes: the others keep
    their seeds, so they play as they would have). ``supervisor`` (``nlac_core.supervision.Supervisor``) puts
    a runtime critic between the policy's proposals and the environment: only the actions it lets through
    (or the last revisions) are executed, and its checks are kept on the executed steps.
    """
    if trials < 1:
        raise EnvError(f"rollout: trials must be at least 1, got {trials}")
    if max_turns is not None and max_turns < 1:
        raise EnvError(f"rollout: max_turns must be at least 1, got {max_turns}")
    spec = env.policy_sampling(spec or SamplingSpec(max_new_tokens=env.default_max_new_tokens))
    slots = [(task, trial) for task in tasks for trial in range(trials) if (task.external_id, trial) not in skip]
    envs = [env.spawn() for _ in slots]
    total = len(envs)
    results: list[TrajectoryRecord | None] = [None] * total
    per_row = takes_row_seeds(policy)
    trial_seeds = [derive_seed(spec.seed, task.external_id, trial) for task, trial in slots]
    seeds_used: list[list[int | None]] = [[] for _ in slots]
    finished = 0
    meta = {"policy_prompt_id": env.policy_template.prompt_id, "policy_backend": policy.name,
            "sampling": spec.to_dict(), "seed": spec.seed,
            "seeding": "per_trial" if per_row else "per_call", "max_turns": max_turns}

    def settle(i: int) -> None:
        nonlocal finished
        record = envs[i].trajectory(trial=slots[i][1], source_model=source_model or policy.model,
                                    source_checkpoint=source_checkpoint,
                                    meta={**meta, "trial_seed": trial_seeds[i], "turn_seeds": seeds_used[i],
                                          **({"supervision": supervisor.summary(envs[i])} if supervisor else {})})
        results[i] = record
        finished += 1
        if on_trajectory is not None:
            on_trajectory(record)

    if total and not (should_stop and should_stop()):
        Environment.reset_batch(envs, [task for task, _ in slots])
        for i, slot in enumerate(envs):
            if slot.done:
                settle(i)
    if progress:
        progress(finished, total)
    play(envs, policy, spec, trial_seeds, seeds_used, lambda i: results[i] is None, settle, max_turns=max_turns,
         supervisor=supervisor, should_stop=should_stop,
         after_turn=(lambda: progress(finished, total)) if progress else None)
    return [r for r in results if r is not None]


def play(envs: Sequence[Environment], policy: Backend, spec: SamplingSpec, trial_seeds: Sequence[int | None],
         seeds_used: Sequence[list[int | None]], is_live: Callable[[int], bool], settle: Callable[[int], None], *,
         max_turns: int | None = None, supervisor=None, should_stop: Callable[[], bool] | None = None,
         after_turn: Callable[[], None] | None = None) -> None:
    """The turns of episodes already started (reset, or restored from a recorded prefix): every live slot acts
    once per turn, through the supervisor when there is one; ``settle(i)`` is called when slot ``i`` ends."""
    per_row = takes_row_seeds(policy)
    turn = 0
    while True:
        live = [i for i in range(len(envs)) if is_live(i)]
        if not live or (should_stop and should_stop()):
            break
        call_spec = replace(spec, seed=derive_seed(spec.seed, "turn", turn))
        rendered = [envs[i].policy_rendered() for i in live]
        requests = [r.request() for r in rendered]
        if per_row:
            row_seeds = [derive_seed(trial_seeds[i], "turn", envs[i].turns) for i in live]
            completions = policy.generate(requests, call_spec, row_seeds=row_seeds)
        else:
            row_seeds = [call_spec.seed] * len(live)
            completions = policy.generate(requests, call_spec)
        for i, seed in zip(live, row_seeds, strict=True):
            seeds_used[i].append(seed)
        turn += 1
        if len(completions) != len(live):
            raise RuntimeError(f"backend {policy.name} answered {len(completions)} of {len(live)} policy requests")
        actions = [r.assistant_prefix + c.text for r, c in zip(rendered, completions, strict=True)]
        checks: list[list[dict]] = [[] for _ in live]
        if supervisor is not None:
            actions, checks = supervisor.review([envs[i] for i in live], rendered, actions, row_seeds)
        step([envs[i] for i in live], actions, [c.finish_reason for c in completions], checks, max_turns)
        for i, completion in zip(live, completions, strict=True):
            envs[i].count("policy", [completion])
            if envs[i].done:
                settle(i)
        if after_turn:
            after_turn()


def step(envs: Sequence[Environment], actions: Sequence[str], finish_reasons: Sequence[str],
         checks: Sequence[list[dict]], max_turns: int | None = None) -> None:
    """Execute one action per slot; mark each step's assistant message (how its generation ended, the runtime
    critic's checks) and end the slots that reached ``max_turns``."""
    starts = [len(env.messages) for env in envs]
    Environment.step_batch(envs, actions)
    for env, start, finish_reason, check in zip(envs, starts, finish_reasons, checks, strict=True):
        _mark_action(env, start, finish_reason, check)
        if not env.done and max_turns is not None and env.turns >= max_turns:
            env.truncate("max_turns")


def takes_row_seeds(backend: Backend) -> bool:
    """Whether ``backend.generate`` accepts one seed per request (``row_seeds=``)."""
    try:
        return "row_seeds" in inspect.signature(backend.generate).parameters
    except (TypeError, ValueError):
        return False


def _mark_action(slot: Environment, start: int, finish_reason: str, supervision: list[dict] | None = None) -> None:
    """Note on the step's assistant message how its generation ended ("length": cut by the token budget), and
    the runtime critic's checks of it when there were any."""
    for index in range(start, len(slot.messages)):
        message = slot.messages[index]
        if message.role == "assistant":
            extra = {"supervision": supervision} if supervision else {}
            slot.messages[index] = replace(message, meta={**message.meta, "finish_reason": finish_reason, **extra})
            return


def write_trajectories(path: str | Path, records: Iterable[TrajectoryRecord]) -> int:
    """Write records as our JSONL through a temporary file (a crash never leaves half a file)."""
    with TrajectoryWriter(path) as writer:
        for record in records:
            writer.write(record)
    return writer.count


class TrajectoryWriter:
    """Stream records into ``path`` as they finish; the file appears complete on close, or not at all."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".part")
        self.count = 0
        self._fh: IO[str] | None = None

    def __enter__(self) -> TrajectoryWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.tmp.open("w", encoding="utf-8")
        return self

    def write(self, record: TrajectoryRecord) -> None:
        assert self._fh is not None, "use TrajectoryWriter as a context manager"
        self.count += nlac_jsonl.write([record], self._fh)
        self._fh.flush()

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self._fh is not None
        self._fh.close()
        if exc_type is None:
            self.tmp.replace(self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def read_trajectories(path: str | Path) -> Iterator[TrajectoryRecord]:
    for item in nlac_jsonl.read(path):
        yield item.record
