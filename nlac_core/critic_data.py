"""Supervision for the runtime critic from self-play: hard tasks, first errors, approve / intervene labels.

The pure part of the asymmetric actor-critic's data pipeline (nothing is run here):

- ``hard_tasks``: per task, c successes out of n self-play episodes. A task is **hard** when it is
  *unreliable* (0 < c < n) or *unsolved* (c = 0); *solved* tasks teach the critic nothing new.
- ``first_error``: in a failed episode, the first agent step that leaves the task's gold path. Walking the
  agent steps in order with a pointer into the gold actions, a tool call is consistent when it is the next
  gold action (tau2's comparison: same name, equal values of the gold's ``compare_args``), a read, or a
  repeat of a gold action already done; any other call, and any invalid action, is the first error. An
  episode that stays on the path but ends short of it (the user stopped, the agent transferred) is wrong at
  its last step; so, with ``at_turn_cap``, is one cut at the turn cap (it used its last turn on something else
  than the expected gold action: a weaker label, opt-in, for actors that never leave the path by a wrong call
  but never do the work either, as SmolLM2-135M, which writes no tool call at all). Anything else is not
  localised and goes to annotators instead (``unlocalised``).
- ``runtime_labels``: one *intervene* target at each first error (feedback from ``FIRST_ERROR_FEEDBACK``),
  *approve* targets on the steps before it and on the steps of the hard tasks' successful episodes, balanced
  to at most ``approve_ratio`` approvals per intervention by a seeded sample.

Gold actions are tau2's ``task.meta["evaluation_criteria"]["actions"]`` or, in an imported tau-bench run, the
task's ``actions`` (``kwargs`` read as ``arguments``; every argument compared, as tau-bench has no
``compare_args``). Only the agent's state-changing gold
actions form the path: the agent need not repeat a gold read, and it cannot do the user's actions. Steps are
numbered like ``records.TrajectoryRecord.steps`` (every assistant message, the scripted greeting included);
scripted steps are never labelled, since no actor proposed them. Episodes without a reward (a harness error)
are left out, as in ``evaluation.compute_metrics``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nlac_core.actions import render_message_action
from nlac_core.envs.mock_domain import _called
from nlac_core.evaluation import is_success
from nlac_core.prompts.nlac import FIRST_ERROR_FEEDBACK
from nlac_core.records import Message, TaskRecord, ToolCall, TrajectoryRecord
from nlac_core.supervision import READ_ONLY_PREFIXES

TRANSFER = "transfer_to_human_agents"
NOTHING_LEFT = "no more changes, everything the task asks for is done"
# How an episode cut at its turn cap ends: our rollouts say max_turns, tau-bench and tau2-bench max_steps.
TURN_CAP_REASONS = ("max_turns", "max_steps")


@dataclass(frozen=True)
class TaskDifficulty:
    """How a task fared in self-play: ``successes`` of ``episodes``."""

    task_id: str
    successes: int
    episodes: int
    hard: bool
    label: Literal["unreliable", "unsolved", "solved"]


@dataclass(frozen=True)
class FirstError:
    """The first agent step of a failed episode that leaves the gold path."""

    step_index: int
    action_text: str
    expected: dict[str, Any] | None  # the next gold action; None when every gold action was done
    reason: str


@dataclass(frozen=True)
class RuntimeLabel:
    """A target for the runtime critic at one agent step of one episode."""

    trajectory: str  # the record's content_hash
    step_index: int
    decision: Literal["approve", "intervene"]
    feedback: str
    action_text: str
    reason: str
    task_id: str


def hard_tasks(trajectories: Iterable[TrajectoryRecord], k: int | None = None) -> list[TaskDifficulty]:
    """Every task's difficulty, in order of first appearance, from its first ``k`` scored episodes (all when
    None)."""
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    outcomes: dict[str, list[bool]] = {}
    for t in trajectories:
        if t.reward is None:
            continue
        seen = outcomes.setdefault(t.task.external_id, [])
        if k is None or len(seen) < k:
            seen.append(is_success(t))
    out = []
    for task_id, results in outcomes.items():
        c, n = sum(results), len(results)
        label: Literal["unreliable", "unsolved", "solved"] = (
            "solved" if c == n else "unsolved" if c == 0 else "unreliable")
        out.append(TaskDifficulty(task_id, c, n, label != "solved", label))
    return out


def first_error(trajectory: TrajectoryRecord, at_turn_cap: bool = False) -> FirstError | None:
    """The first wrong step of a failed episode; None for a success, a task without gold actions, or an
    episode whose failure is not localised (see the module docstring)."""
    if not _failed(trajectory):
        return None
    gold = _gold_path(trajectory.task)
    if not gold:
        return None
    steps = trajectory.steps
    done = 0
    for index, (_, message) in enumerate(steps):
        last = index == len(steps) - 1
        if message.meta.get("action_error"):
            expected = gold[done] if done < len(gold) else None
            return FirstError(index, render_message_action(message), expected,
                              f"invalid action: {message.meta['action_error']}")
        for call in message.tool_calls:
            expected = gold[done] if done < len(gold) else None
            if expected is not None and _matches(expected, call):
                done += 1
            elif not _is_read(call) and not any(_matches(g, call) for g in gold[:done]):
                return FirstError(index, render_message_action(message), expected,
                                  _wrong_call(call, expected, last))
    if done == len(gold) or not steps:
        return None
    index, message = len(steps) - 1, steps[-1][1]
    ended = any(c.name == TRANSFER for c in message.tool_calls) or trajectory.termination_reason == "user_stop"
    cut = at_turn_cap and trajectory.termination_reason in TURN_CAP_REASONS
    if not (ended or cut) or message.meta.get("scripted"):
        return None
    what = "ran out of turns" if cut and not ended else "ended"
    return FirstError(index, render_message_action(message), gold[done], f"{what} without {gold[done].get('name')}")


def runtime_labels(trajectories: Sequence[TrajectoryRecord], difficulties: Iterable[TaskDifficulty],
                   approve_ratio: float | None = 1.0, seed: int = 0, at_turn_cap: bool = False) -> list[RuntimeLabel]:
    """Intervene at each localised first error of a hard task's failed episode, approve the steps before it and
    the steps of its successful episodes; then ``balance`` them (``approve_ratio`` None: every approval, to
    balance later, after a validation has dropped some interventions). Labels come in trajectory order, then
    step order."""
    if approve_ratio is not None and approve_ratio < 0:
        raise ValueError(f"approve_ratio must be 0 or more, got {approve_ratio}")
    hard = _hard_ids(difficulties)
    labels: list[RuntimeLabel] = []
    for t in trajectories:
        if t.task.external_id not in hard or t.reward is None:
            continue
        if is_success(t):
            labels += _approvals(t, len(t.steps), "a step of a successful episode")
            continue
        error = first_error(t, at_turn_cap)
        if error is None:
            continue
        labels += _approvals(t, error.step_index, "before the episode's first error")
        feedback = FIRST_ERROR_FEEDBACK.format(reason=error.reason, expected=render_gold(error.expected))
        labels.append(RuntimeLabel(t.content_hash(), error.step_index, "intervene", feedback, error.action_text,
                                   error.reason, t.task.external_id))
    return labels if approve_ratio is None else balance(labels, approve_ratio, seed)


def balance(labels: Sequence[RuntimeLabel], approve_ratio: float, seed: int = 0) -> list[RuntimeLabel]:
    """Every intervention and at most ``round(approve_ratio * interventions)`` approvals, sampled with
    ``random.Random(seed)``; the order is kept."""
    if approve_ratio < 0:
        raise ValueError(f"approve_ratio must be 0 or more, got {approve_ratio}")
    approvals = [i for i, label in enumerate(labels) if label.decision == "approve"]
    keep = round(approve_ratio * (len(labels) - len(approvals)))
    kept = set(approvals if len(approvals) <= keep else random.Random(seed).sample(approvals, keep))
    return [label for i, label in enumerate(labels) if label.decision == "intervene" or i in kept]


def unlocalised(trajectories: Iterable[TrajectoryRecord], difficulties: Iterable[TaskDifficulty],
                at_turn_cap: bool = False) -> list[str]:
    """Content hashes of the hard tasks' failed episodes whose first error is not localised (for annotators)."""
    hard = _hard_ids(difficulties)
    return [t.content_hash() for t in trajectories
            if t.task.external_id in hard and _failed(t) and first_error(t, at_turn_cap) is None]


def render_gold(action: dict[str, Any] | None) -> str:
    """A gold action as a call with the arguments that are compared (``...`` for the others)."""
    if action is None:
        return NOTHING_LEFT
    arguments = action.get("arguments") or {}
    keys = _compared(action)
    shown = [f"{k}={json.dumps(arguments.get(k), ensure_ascii=False)}" for k in keys]
    if set(arguments) - set(keys):
        shown.append("...")
    return f"{action.get('name')}({', '.join(shown)})"


# -- inside ---------------------------------------------------------------------------------------------------


def _failed(trajectory: TrajectoryRecord) -> bool:
    return trajectory.reward is not None and not is_success(trajectory)


def _hard_ids(difficulties: Iterable[TaskDifficulty]) -> set[str]:
    return {d.task_id for d in difficulties if d.hard}


def gold_actions(task: TaskRecord) -> list[dict[str, Any]]:
    """The task's gold actions as tau2 writes them (``name``, ``arguments``, optional ``requestor`` and
    ``compare_args``), whichever benchmark the task came from: tau2's ``meta["evaluation_criteria"]["actions"]``
    (generated and imported tau2 tasks), else the record's ``gold_actions``, where an imported tau-bench task keeps
    its ``task.actions`` with the arguments under ``kwargs``."""
    actions = (task.meta.get("evaluation_criteria") or {}).get("actions") or task.gold_actions or ()
    out = []
    for action in actions:
        if not isinstance(action, dict) or not isinstance(action.get("name"), str):
            continue
        if "arguments" not in action and isinstance(action.get("kwargs"), dict):
            action = {**{k: v for k, v in action.items() if k != "kwargs"}, "arguments": action["kwargs"]}
        out.append(action)
    return out


def _gold_path(task: TaskRecord) -> list[dict[str, Any]]:
    """The agent's state-changing gold actions, in order."""
    return [a for a in gold_actions(task) if a.get("requestor", "assistant") == "assistant"
            and not a["name"].lower().startswith(READ_ONLY_PREFIXES)]


def _compared(action: dict[str, Any]) -> list[str]:
    keys = action.get("compare_args")
    return list(action.get("arguments") or {}) if keys is None else list(keys)


def _matches(gold: dict[str, Any], call: ToolCall) -> bool:
    return _called(gold, [(call.name, call.arguments)])


def _is_read(call: ToolCall) -> bool:
    return call.name.lower().startswith(READ_ONLY_PREFIXES)


def _wrong_call(call: ToolCall, expected: dict[str, Any] | None, last: bool) -> str:
    if expected is None:
        return f"{call.name} is not needed"
    if call.name == TRANSFER and last:
        return f"ended without {expected.get('name')}"
    if call.name == expected.get("name"):
        gold = expected.get("arguments") or {}
        wrong = [k for k in _compared(expected) if call.arguments.get(k) != gold.get(k)]
        return f"wrong {', '.join(wrong)} for {call.name}"
    return f"{call.name} instead of {expected.get('name')}"


def _approvals(trajectory: TrajectoryRecord, before: int, reason: str) -> list[RuntimeLabel]:
    """Approve labels on the actor's steps before step ``before`` (not scripted, not invalid)."""
    return [RuntimeLabel(trajectory.content_hash(), index, "approve", "", render_message_action(message), reason,
                         trajectory.task.external_id)
            for index, (_, message) in enumerate(trajectory.steps[:before]) if _labelled(message)]


def _labelled(message: Message) -> bool:
    return not message.meta.get("scripted") and not message.meta.get("action_error")
