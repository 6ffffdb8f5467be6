"""What the trajectory page shows, computed once: messages with their tool calls
pretty-printed, tool results linked to their calls, the step index, the reward
breakdown. All text stays plain strings: templates escape it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from webapp.trajectories import supervision
from webapp.trajectories.models import Message, Trajectory


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@dataclass
class ToolCallView:
    id: str
    name: str
    arguments_json: str
    requestor: str
    anchor: str
    result_position: int | None = None


@dataclass
class MessageView:
    message: Message
    tool_calls: list[ToolCallView] = field(default_factory=list)
    call_position: int | None = None  # for a tool result: where its call is
    call_name: str | None = None
    critiques: list = field(default_factory=list)  # model critiques of this step (jobs' StepCritique rows)
    supervision: supervision.StepSupervision | None = None  # the runtime critic's checks of this step

    @property
    def anchor(self) -> str:
        return f"m{self.message.position}"


def anchor_for_call(call_id: str) -> str:
    return "call-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)


def breakdown(reward_info: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The scalar parts of a reward breakdown, whatever the benchmark calls them."""
    if not reward_info:
        return []
    rows: list[tuple[str, Any]] = []
    for key in ("reward_breakdown", "info"):
        part = reward_info.get(key)
        if isinstance(part, dict):
            rows += [(k, v) for k, v in part.items() if isinstance(v, (int, float, bool)) or v is None]
    for key, value in reward_info.items():
        if isinstance(value, dict) and {"db_match", "db_reward"} & value.keys():
            rows += [(f"{key}.{k}", v) for k, v in value.items()]
    return rows


MAX_CRITIQUES = 500  # newest first; a trajectory critiqued by more jobs than this shows the latest


def context(trajectory: Trajectory) -> dict[str, Any]:
    messages = list(trajectory.messages.order_by("position"))
    views = [MessageView(m) for m in messages]
    # One pass in order: a result answers the latest call with its id before it
    # (agents do reuse call ids within an episode).
    calls: dict[str, tuple[int, ToolCallView]] = {}
    for v in views:
        m = v.message
        for tc in m.tool_calls:
            call_id = str(tc.get("id", ""))
            tcv = ToolCallView(id=call_id, name=str(tc.get("name", "")),
                               arguments_json=pretty_json(tc.get("arguments", {})),
                               requestor=str(tc.get("requestor") or "assistant"),
                               anchor=f"{anchor_for_call(call_id)}-m{m.position}")
            v.tool_calls.append(tcv)
            calls[call_id] = (m.position, tcv)
        if m.role == "tool" and m.tool_call_id in calls:
            position, tcv = calls.pop(m.tool_call_id)
            v.call_position, v.call_name = position, tcv.name
            tcv.result_position = m.position
    steps = [v for v in views if v.message.step_index is not None]
    by_step: dict[int, list] = {}
    for critique in trajectory.critiques.select_related("checkpoint").order_by("step_index", "-id")[:MAX_CRITIQUES]:
        by_step.setdefault(critique.step_index, []).append(critique)
    branches = supervision.branches_of(trajectory)
    for v in steps:
        v.critiques = by_step.get(v.message.step_index, [])
        v.supervision = supervision.step_supervision(v.message.meta)
        if v.message.step_index in branches:
            v.supervision = v.supervision or supervision.StepSupervision()
            v.supervision.branches = branches[v.message.step_index]
    task = trajectory.task
    return {
        "trajectory": trajectory,
        "task": task,
        "conversation": views,
        "steps": steps,
        "supervision": supervision.summary(trajectory),
        "breakdown": breakdown(trajectory.reward_info),
        "gold_actions": [pretty_json(a) for a in task.gold_actions],
        "reward_info_json": pretty_json(trajectory.reward_info) if trajectory.reward_info else "",
        "usage_json": pretty_json(trajectory.usage) if trajectory.usage else "",
    }
