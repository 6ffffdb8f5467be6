"""OpenAI chat messages -> records. Shared by the formats that embed them
(tau-bench, OpenAI JSONL, SWE-agent)."""

from __future__ import annotations

from nlac_core.formats.base import Obj, content_text, parse_arguments
from nlac_core.records import ROLES, Message, ToolCall

_KNOWN = {"role", "content", "tool_calls", "tool_call_id", "name"}


def parse_tool_calls(msg: Obj, requestor: str) -> tuple[ToolCall, ...]:
    calls = []
    for i, tc in enumerate(msg.objs("tool_calls", required=False)):
        fn = tc.obj("function")
        calls.append(ToolCall(
            id=str(tc.opt("id", str, int, default=f"call_{i}")),
            name=fn.req("name", str),
            arguments=parse_arguments(fn.data.get("arguments"), msg.ctx, f"{fn.path}.arguments"),
            requestor=requestor,
        ))
    return tuple(calls)


def parse_message(msg: Obj, extra_known: frozenset[str] = frozenset()) -> Message:
    """One OpenAI chat message. Unknown keys are kept in ``meta`` so nothing is lost."""
    role = msg.req("role", str)
    if role == "function":  # legacy OpenAI name for a tool result
        role = "tool"
    if role not in ROLES:
        msg.ctx.fail(f"unknown role {role!r} (expected one of {', '.join(ROLES)})", f"{msg.path}.role")
    tool_call_id = msg.opt("tool_call_id", str)
    if tool_call_id is None and isinstance(msg.data.get("tool_call_ids"), list) and msg.data["tool_call_ids"]:
        tool_call_id = str(msg.data["tool_call_ids"][0])  # SWE-agent's list form
    meta = {k: v for k, v in msg.data.items() if k not in _KNOWN and k not in extra_known}
    return Message(
        role=role,
        content=content_text(msg.data.get("content"), msg.ctx, f"{msg.path}.content"),
        tool_calls=parse_tool_calls(msg, "assistant") if role == "assistant" else (),
        tool_call_id=tool_call_id,
        name=msg.opt("name", str),
        requestor="assistant" if role == "tool" else None,
        meta=meta,
    )
