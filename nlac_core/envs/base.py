"""The environment protocol, and the driver that batches environments' own LLM calls.

An :class:`Environment` instance is one episode slot, gym-style: ``reset(task)``
returns the first observation and ``step(action_text)`` a :class:`StepResult`.
A rollout runs many slots side by side (``env.spawn()`` makes a sibling that
shares the data and the backends), and must advance every live episode with
one policy call and one call per environment LLM (oracle, simulated user) per
turn. So environments do not call their LLM themselves: their reset and step
are written as generators that *yield* an :class:`LLMQuery` and receive its
answer, and :func:`drive` runs the generators of all live episodes together,
merging the queries of one round into one backend call per (backend, kind,
sampling spec). The environment code still reads top to bottom, and
``reset``/``step`` on a single slot go through the same driver.

A backend that cannot score (``Unsupported``) has the exception thrown back
into each generator that asked, so the environment can fall back to
generating and parsing; the fallback of every episode is again one call.
"""

from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nlac_core.actions import ActionSpec
from nlac_core.backends.base import Backend, ChatRequest, Completion, SamplingSpec, ScoreRequest, Unsupported
from nlac_core.prompts.base import PromptTemplate, Rendered
from nlac_core.records import Message, TaskRecord, TrajectoryRecord

ROOT = Path(__file__).resolve().parent.parent.parent


class EnvError(ValueError):
    """A bad environment argument (unknown split, bad limit); the CLI prints it and exits 2."""


def shared_data_dir() -> Path:
    """``NLAC_SHARED_DATA`` or ``../shared/data`` beside the repository (where the real data lives)."""
    return Path(os.environ.get("NLAC_SHARED_DATA") or ROOT.parent / "shared" / "data")


def data_path(given: str | Path | None, default: str, what: str) -> Path:
    """The file to read: ``given`` or ``default`` under the shared data dir; a clear error if it is missing."""
    path = Path(given) if given else shared_data_dir() / default
    if not path.exists():
        hint = "" if given else " (pass another path, or set NLAC_SHARED_DATA to the shared data folder)"
        raise FileNotFoundError(f"{what} not found: {path}{hint}")
    return path


def take(items: list, limit: int | None, what: str) -> list:
    if limit is not None and limit < 1:
        raise EnvError(f"{what}: limit must be at least 1, got {limit}")
    return items if limit is None else items[:limit]


@dataclass(frozen=True)
class StepResult:
    observation: str
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LLMQuery:
    """What an environment asks its LLM: generations (``spec`` given) or log-likelihoods (``spec`` None).

    The answer sent back into the generator is the list of Completions or floats, in order.
    """

    backend: Backend
    requests: tuple[ChatRequest, ...] | tuple[ScoreRequest, ...]
    spec: SamplingSpec | None = None

    @property
    def kind(self) -> str:
        return "generate" if self.spec is not None else "loglikelihood"


Episode = Generator[LLMQuery, Any, Any]


def drive(episodes: Sequence[Episode | Any]) -> list[Any]:
    """Run episode generators together; returns each one's return value, in order.

    Each round, the pending queries are grouped by (backend, kind, spec) and sent
    as one call per group; answers go back to the generators that asked, whose
    next queries wait for the next round. A non-generator is taken as already
    finished (an environment step that needed no LLM).
    """
    results: list[Any] = [None] * len(episodes)
    pending: dict[int, LLMQuery] = {}

    def advance(i: int, resume) -> None:
        try:
            query = resume()
        except StopIteration as stop:
            results[i] = stop.value
            return
        if not isinstance(query, LLMQuery):
            raise TypeError(f"an environment yielded {type(query).__name__}, expected an LLMQuery")
        pending[i] = query

    for i, episode in enumerate(episodes):
        if inspect.isgenerator(episode):
            advance(i, lambda e=episode: e.send(None))
        else:
            results[i] = episode
    while pending:
        groups: dict[tuple, list[int]] = {}
        for i, query in pending.items():
            groups.setdefault((id(query.backend), query.kind, query.spec), []).append(i)
        current, pending = pending, {}
        for members in groups.values():
            first = current[members[0]]
            requests = [r for i in members for r in current[i].requests]
            try:
                if first.spec is not None:
                    answers: list[Any] = first.backend.generate(requests, first.spec)
                else:
                    answers = first.backend.loglikelihood(requests)
            except Unsupported as exc:
                for i in members:
                    advance(i, lambda e=episodes[i], x=exc: e.throw(x))
                continue
            if len(answers) != len(requests):
                raise RuntimeError(f"backend {first.backend.name} answered {len(answers)} of {len(requests)} requests")
            offset = 0
            for i in members:
                n = len(current[i].requests)
                part = answers[offset:offset + n]
                offset += n
                advance(i, lambda e=episodes[i], p=part: e.send(p))
    return results


class Environment(ABC):
    """One episode slot of an environment; see the module docstring for batching.

    Subclasses set ``name``, ``action_spec``, ``policy_template`` and implement
    ``tasks``, ``spawn``, ``render_policy``, ``_reset`` and ``_step`` (the last
    two may be generators yielding :class:`LLMQuery`). They end an episode with
    :meth:`_finish`. The base class keeps the episode's messages, turn count,
    return and usage, and turns a finished episode into a TrajectoryRecord.
    """

    name: ClassVar[str] = ""
    policy_template: ClassVar[PromptTemplate]
    policy_stop: ClassVar[tuple[str, ...]] = ()  # stop strings the policy's sampling needs here
    default_max_new_tokens: ClassVar[int] = 128

    action_spec: ActionSpec
    max_turns: int = 20  # the environment's own cap on agent steps

    def __init__(self) -> None:
        self._clear(None)

    def _clear(self, task: TaskRecord | None) -> None:
        self.task: TaskRecord | None = task
        self.messages: list[Message] = []
        self.turns = 0
        self.done = False
        self.total_reward = 0.0
        self.reward_info: dict[str, Any] = {}
        self.termination_reason = ""
        self.usage: dict[str, int] = {}

    # -- what subclasses provide -------------------------------------------------------------------------

    @abstractmethod
    def tasks(self, split: str = "", limit: int | None = None) -> list[TaskRecord]:
        """The tasks of a split, in a stable order; ``limit`` keeps the first ones."""

    @abstractmethod
    def spawn(self) -> Environment:
        """A fresh slot sharing this one's data and backends (for running episodes side by side)."""

    @abstractmethod
    def render_policy(self, task: TaskRecord, history: Sequence[Message]) -> Rendered:
        """The policy prompt for a state: a task and the messages so far (a live or an imported episode)."""

    @abstractmethod
    def _reset(self, task: TaskRecord) -> Episode | str:
        """Set up the episode (messages already cleared); return the first observation."""

    @abstractmethod
    def _step(self, action_text: str) -> Episode | StepResult:
        """Apply one agent action (``turns`` already counts it); return its StepResult."""

    @property
    def env_models(self) -> str:
        """The model(s) the environment itself uses (oracle, simulated user): TrajectoryRecord.user_model."""
        return ""

    @property
    def env_llm(self) -> dict[str, Any]:
        """Provenance of the environment's own LLM (backend, model, sampling), stored on each trajectory."""
        return {}

    @property
    def policy_text(self) -> str:
        """The domain policy the agent must follow, if any: TrajectoryRecord.policy."""
        return ""

    # -- the protocol --------------------------------------------------------------------------------------

    def reset(self, task: TaskRecord) -> str:
        return self.reset_batch([self], [task])[0]

    def step(self, action_text: str) -> StepResult:
        return self.step_batch([self], [action_text])[0]

    @staticmethod
    def reset_batch(envs: Sequence[Environment], tasks: Sequence[TaskRecord]) -> list[str]:
        """Reset many slots; their LLM calls (a simulated user's first message) are batched."""
        if len(envs) != len(tasks):
            raise ValueError(f"reset_batch: {len(envs)} environments but {len(tasks)} tasks")
        for env, task in zip(envs, tasks, strict=True):
            env._clear(task)
        return drive([env._reset(task) for env, task in zip(envs, tasks, strict=True)])

    @staticmethod
    def step_batch(envs: Sequence[Environment], actions: Sequence[str]) -> list[StepResult]:
        """Step many live slots with one action each; their LLM calls are batched (one call per round)."""
        if len(envs) != len(actions):
            raise ValueError(f"step_batch: {len(envs)} environments but {len(actions)} actions")
        for env in envs:
            if env.task is None:
                raise RuntimeError(f"{env.name}: step before reset")
            if env.done:
                raise RuntimeError(f"{env.name}: step after the episode ended ({env.termination_reason})")
            env.turns += 1
        results = drive([env._step(action or "") for env, action in zip(envs, actions, strict=True)])
        for env, result in zip(envs, results, strict=True):
            env.total_reward += result.reward
        return results

    def restore(self, task: TaskRecord, prefix: Sequence[Message]) -> None:
        """Put the slot in the state a recorded episode was in after ``prefix`` (its messages before an agent
        step), without any LLM call: the start of a counterfactual re-run from that step. The turn count and the
        return are those of the prefix's agent actions (their ``meta["reward"]``); the rest of the state is the
        environment's (``_restore``)."""
        self._clear(task)
        self.messages = list(prefix)
        actions = [m for m in prefix if m.role == "assistant" and "reward" in m.meta]
        self.turns = len(actions)
        self.total_reward = float(sum(m.meta.get("reward") or 0.0 for m in actions))
        self._restore(task, self.messages)

    def _restore(self, task: TaskRecord, prefix: list[Message]) -> None:
        """The state beyond the messages: none by default (the episode is its conversation, as in MATH and 20
        Questions); an environment with more (a database) rebuilds it here from the task and the prefix."""
        return None

    def policy_rendered(self) -> Rendered:
        if self.task is None:
            raise RuntimeError(f"{self.name}: no episode (call reset first)")
        return self.render_policy(self.task, self.messages)

    def policy_request(self) -> ChatRequest:
        """The policy prompt for the current state, ready for ``Backend.generate``."""
        return self.policy_rendered().request()

    def policy_sampling(self, spec: SamplingSpec) -> SamplingSpec:
        """``spec`` with the stop strings this environment's action format needs."""
        stop = tuple(dict.fromkeys(spec.stop + self.policy_stop))
        return SamplingSpec.from_dict({**spec.to_dict(), "stop": stop})

    def truncate(self, reason: str) -> None:
        """End a live episode from outside (turn cap, cancellation); subclasses settle the reward."""
        if not self.done:
            self._finish(reason, self._truncated_reward_info(reason), reward=self._truncated_reward())

    def _truncated_reward(self) -> float:
        return 0.0

    def _truncated_reward_info(self, reason: str) -> dict[str, Any]:
        return {"success": False, "note": f"the episode did not end by itself ({reason})"}

    def _finish(self, reason: str, reward_info: dict[str, Any], reward: float = 0.0) -> None:
        """End the episode; ``reward`` is added to the return (the final step's reward is added by the caller)."""
        self.done = True
        self.termination_reason = reason
        self.total_reward += reward
        self.reward_info = {"success": False, **reward_info}

    def count(self, prefix: str, completions: Sequence[Completion]) -> None:
        """Add the token counts of completions to ``usage`` under ``prefix``."""
        for c in completions:
            self.usage[f"{prefix}_prompt_tokens"] = self.usage.get(f"{prefix}_prompt_tokens", 0) + c.prompt_tokens
            self.usage[f"{prefix}_completion_tokens"] = (self.usage.get(f"{prefix}_completion_tokens", 0)
                                                         + c.completion_tokens)

    def trajectory(self, trial: int = 0, source_model: str = "", source_checkpoint: str = "",
                   meta: dict[str, Any] | None = None) -> TrajectoryRecord:
        """The episode as a record (finished or not; an unfinished one has no reward)."""
        if self.task is None:
            raise RuntimeError(f"{self.name}: no episode (call reset first)")
        return TrajectoryRecord(
            task=self.task,
            messages=tuple(self.messages),
            trial=trial,
            source_model=source_model,
            source_checkpoint=source_checkpoint,
            user_model=self.env_models,
            reward=self.total_reward if self.done else None,
            reward_info=dict(self.reward_info) if self.done else None,
            termination_reason=self.termination_reason,
            usage=dict(self.usage),
            external_id=f"{self.name}/{self.task.external_id}/trial-{trial}",
            policy=self.policy_text,
            meta={"env": self.name, "turns": self.turns, **({"env_llm": self.env_llm} if self.env_llm else {}),
                  **(meta or {})},
        )
