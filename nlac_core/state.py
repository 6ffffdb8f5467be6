"""States as text: the conversation up to an agent step, rendered for a prompt.

A state s_t is everything before the agent's step t. Benchmark states are long
(the tau-bench airline policy alone is ~25k characters) and the embedded model
is small and slow, so a rendered state keeps the start of the policy, the
first user turn and as many of the most recent messages as fit in a character
budget, and says what it left out. Rendering is deterministic: the same state
and budget always give the same text (prompts are cached and compared by it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nlac_core.actions import render_message_action
from nlac_core.records import Message, TrajectoryRecord

DEFAULT_MAX_CHARS = 2000
POLICY_CHARS = 400
MESSAGE_CHARS = 500


@dataclass(frozen=True)
class StepView:
    """One agent step of a trajectory, seen as a transition (s_t, a_t, r_t, s_t+1).

    ``index`` is the step number among agent steps; ``message_index`` its place
    in the conversation; ``next_message_index`` the next agent step's place, or
    None when this is the last step (a terminal transition).
    """

    trajectory: TrajectoryRecord
    index: int
    message_index: int
    next_message_index: int | None

    @property
    def action(self) -> Message:
        return self.trajectory.messages[self.message_index]

    @property
    def history(self) -> tuple[Message, ...]:
        return self.trajectory.messages[: self.message_index]

    @property
    def terminal(self) -> bool:
        return self.next_message_index is None

    @property
    def between(self) -> tuple[Message, ...]:
        """What happened after the action and before the next agent step (tool results, user reply)."""
        end = self.next_message_index if self.next_message_index is not None else len(self.trajectory.messages)
        return self.trajectory.messages[self.message_index + 1: end]

    @property
    def reward(self) -> float:
        """r_t: the episode's reward arrives at the terminal transition, zero before it."""
        return float(self.trajectory.reward or 0.0) if self.terminal else 0.0

    def next_step(self) -> StepView | None:
        if self.next_message_index is None:
            return None
        return steps_of(self.trajectory)[self.index + 1]


def steps_of(trajectory: TrajectoryRecord) -> list[StepView]:
    positions = [i for i, _ in trajectory.steps]
    return [StepView(trajectory, n, pos, positions[n + 1] if n + 1 < len(positions) else None)
            for n, pos in enumerate(positions)]


def step_of(trajectory: TrajectoryRecord, index: int) -> StepView:
    steps = steps_of(trajectory)
    if not 0 <= index < len(steps):
        raise IndexError(f"step {index} out of range: the trajectory has {len(steps)} agent steps")
    return steps[index]


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 15].rstrip() + " ...[cut]"


def render_message(message: Message, limit: int = MESSAGE_CHARS) -> str:
    if message.role == "assistant":
        return "AGENT: " + _clip(render_message_action(message), limit)
    if message.role == "tool":
        name = f" {message.name}" if message.name else ""
        return f"TOOL RESULT{name}: " + _clip(message.content or "", limit)
    if message.role == "user":
        return "USER: " + _clip(message.content or "", limit)
    return "SYSTEM: " + _clip(message.content or "", limit)


def render_messages(messages: tuple[Message, ...] | list[Message], max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """A transcript that fits ``max_chars``: the system policy's start, the first
    user turn, then the most recent messages (older middle messages are dropped)."""
    messages = list(messages)
    head: list[str] = []
    rest = messages
    if rest and rest[0].role == "system":
        head.append(render_message(rest[0], POLICY_CHARS))
        rest = rest[1:]
    if rest and rest[0].role == "user":
        head.append(render_message(rest[0]))
        rest = rest[1:]
    budget = max_chars - sum(len(h) + 1 for h in head)
    tail: list[str] = []
    for message in reversed(rest):
        line = render_message(message)
        if tail and budget - len(line) - 1 < 0:
            break
        tail.append(line)
        budget -= len(line) + 1
    dropped = len(rest) - len(tail)
    lines = head + ([f"[... {dropped} earlier messages left out ...]"] if dropped else []) + tail[::-1]
    return "\n".join(lines) if lines else "(the conversation has not started)"


def render_state(step: StepView, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    return render_messages(step.history, max_chars)


def render_outcome(trajectory: TrajectoryRecord) -> str:
    if trajectory.reward is None:
        return "the episode ended without a reward"
    return f"the episode ended with reward {trajectory.reward:g} ({'success' if trajectory.success else 'failure'})"


def pick_steps(trajectories: Iterable[TrajectoryRecord], which: str = "all",
               max_steps: int | None = None) -> list[StepView]:
    """The agent steps ``which`` names in each trajectory: ``all``, ``first``, ``last`` or step numbers such
    as ``0,2,-1`` (negative counts from the end; numbers past a trajectory's end are skipped), at most
    ``max_steps`` in all. A malformed ``which`` is a ValueError that quotes it."""
    numbers: list[int] = []
    if which not in ("all", "first", "last"):
        try:
            numbers = [int(n) for n in which.split(",") if n.strip()]
        except ValueError:
            raise ValueError(f"{which!r}: expected all, first, last or step numbers like 0,2,-1") from None
    chosen: list[StepView] = []
    for trajectory in trajectories:
        steps = steps_of(trajectory)
        if not steps:
            continue
        if which == "all":
            chosen.extend(steps)
        elif which == "first":
            chosen.append(steps[0])
        elif which == "last":
            chosen.append(steps[-1])
        else:
            chosen.extend(steps[n] for n in numbers if -len(steps) <= n < len(steps))
        if max_steps is not None and len(chosen) >= max_steps:
            return chosen[:max_steps]
    return chosen

