"""tau2-bench results: ``{timestamp, info, tasks, simulations}`` (sierra-research/tau2-bench).

Differs from tau-bench: no system message (the policy is in
``info.environment_info.policy``), tool-call arguments are dicts, a tool result
points to its call by ``id``, users may call tools of their own
(``requestor: "user"``), and ``simulations`` may be empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from nlac_core.formats.base import (
    Context,
    Item,
    Obj,
    Shard,
    content_text,
    first_json_char,
    head_bytes,
    record,
)
from nlac_core.formats.json_stream import member, require_lists, stream_array
from nlac_core.records import REQUESTORS, ROLES, Message, TaskRecord, ToolCall, TrajectoryRecord

NAME = "tau2-bench"

_MSG_KNOWN = {"role", "content", "tool_calls", "id", "requestor", "turn_idx"}
_SIM_KNOWN = {"id", "task_id", "trial", "termination_reason", "agent_cost", "user_cost", "reward_info", "messages"}


def sniff(head: bytes, path: Path) -> bool:
    if path.suffix != ".json" or first_json_char(head) != "{":
        return False
    return b'"simulations"' in head or (b'"agent_info"' in head and b'"user_info"' in head)


def _instruction(task: Obj) -> str:
    scenario = task.data.get("user_scenario") or {}
    instructions = scenario.get("instructions") if isinstance(scenario, dict) else None
    if isinstance(instructions, str):
        return instructions
    if isinstance(instructions, dict):
        parts = [f"{k.replace('_', ' ').capitalize()}: {v}" for k, v in instructions.items()
                 if isinstance(v, str) and v.strip() and k != "domain"]
        return "\n\n".join(parts)
    return ""


def parse_task(task: Obj) -> TaskRecord:
    criteria = task.obj("evaluation_criteria", required=False)
    actions: tuple[dict[str, Any], ...] = ()
    outputs: tuple[str, ...] = ()
    if criteria is not None:
        actions = tuple(a.data for a in criteria.objs("actions", required=False))
        outputs = tuple(str(o) for o in criteria.opt("communicate_info", list, default=[]))
    return TaskRecord(
        external_id=str(task.req("id", str, int)),
        instruction=_instruction(task),
        gold_actions=actions,
        gold_outputs=outputs,
        meta={k: v for k, v in task.data.items() if k != "id"},
    )


def parse_message(msg: Obj) -> Message:
    role = msg.choice("role", ROLES)
    requestor = msg.choice("requestor", REQUESTORS, required=False)
    calls = []
    for i, tc in enumerate(msg.objs("tool_calls", required=False)):
        tc_requestor = tc.opt("requestor", str, default=role if role in REQUESTORS else "assistant")
        calls.append(ToolCall(
            id=str(tc.opt("id", str, int, default=f"call_{i}")),
            name=tc.req("name", str),
            arguments=tc.opt("arguments", dict, default={}),
            requestor=tc_requestor,
        ))
    return Message(
        role=role,
        content=content_text(msg.data.get("content"), msg.ctx, f"{msg.path}.content"),
        tool_calls=tuple(calls),
        tool_call_id=str(msg.data["id"]) if role == "tool" and msg.has("id") else None,
        requestor=requestor if role == "tool" else None,
        turn_idx=msg.opt("turn_idx", int),
        meta={k: v for k, v in msg.data.items() if k not in _MSG_KNOWN},
    )


def parse_simulation(sim: Obj, tasks: dict[str, TaskRecord], info: Obj) -> TrajectoryRecord:
    task_id = str(sim.req("task_id", str, int))
    task = tasks.get(task_id) or TaskRecord(external_id=task_id)
    reward_info = sim.opt("reward_info", dict)
    reward = None
    if reward_info is not None:
        reward = Obj(reward_info, sim.ctx, f"{sim.path}.reward_info").opt("reward", float)
    agent_cost = sim.opt("agent_cost", float)
    user_cost = sim.opt("user_cost", float)
    usage = {k: v for k, v in (("agent_cost", agent_cost), ("user_cost", user_cost)) if v is not None}
    env = info.obj("environment_info", required=False)
    agent = info.obj("agent_info", required=False)
    user = info.obj("user_info", required=False)
    return TrajectoryRecord(
        task=task,
        messages=tuple(parse_message(m) for m in sim.objs("messages")),
        trial=sim.opt("trial", int, default=0),
        source_model=agent.opt("llm", str, default="") if agent else "",
        user_model=user.opt("llm", str, default="") if user else "",
        reward=float(reward) if reward is not None else None,
        reward_info=reward_info,
        termination_reason=sim.opt("termination_reason", str, default=""),
        cost=agent_cost,
        usage=usage,
        external_id=str(sim.opt("id", str, default="")),
        policy=env.opt("policy", str, default="") if env else "",
        meta={k: v for k, v in sim.data.items() if k not in _SIM_KNOWN},
    )


SHARDED = True


def read(path: str | Path, source_model: str = "", shard: Shard | None = None) -> Iterator[Item]:
    path = Path(path)
    shard = shard or Shard()
    if first_json_char(head_bytes(path)) != "{":
        Context(str(path), "top level").fail(
            "expected a tau2-bench results object {timestamp, info, tasks, simulations}")
    require_lists(path, required=("simulations",), optional=("tasks",))
    info_raw = member(path, "info")
    info = record(info_raw if info_raw is not None else {}, Context(str(path), "info"), "info")
    tasks: dict[str, TaskRecord] = {}
    for index, raw, clean in stream_array(path, "tasks"):
        ctx = Context(str(path), f"task {index}")
        task = parse_task(record(raw, ctx, f"tasks[{index}]", clean_already=clean))
        tasks[task.external_id] = task  # every reader needs every task: its simulations name them
        if shard.take():
            yield Item(ctx.where, index, task)
    for index, raw, clean in stream_array(path, "simulations", shard):
        ctx = Context(str(path), f"simulation {index}")
        sim = parse_simulation(record(raw, ctx, f"simulations[{index}]", clean_already=clean), tasks, info)
        if source_model:
            sim = replace(sim, source_model=source_model)
        yield Item(ctx.where, index, sim)

