"""OpenAI chat messages -> records. Shared by the formats that embed them
(tau-bench, OpenAI JSONL, SWE-agent)."""

from __future__ import annotations

from nlac_core.formats.base import Obj, content_text, parse_arguments
from nlac_core.records import ROLES, Message, ToolCall

_KNOWN = {"role", "content", "tool_calls", "tool_call_id", "name"}
_ROLES = frozenset(ROLES)


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
    message = _well_formed(msg, extra_known)
    if message is not None:
        return message
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


def _well_formed(msg: Obj, extra_known: frozenset[str]) -> Message | None:
    """``parse_message`` of a message in the shape nearly all are (a known role, text content, tool calls with a
    name each), made without the field-by-field checks' bookkeeping (a tenth of a reader's time on a big tau-bench
    run); None for anything else, which the checks then read, naming the fault. Tool-call arguments are read as the
    checks read them."""
    data = msg.data
    role, content = data.get("role"), data.get("content")
    tool_call_id, name = data.get("tool_call_id"), data.get("name")
    if not (type(role) is str and role in _ROLES and (content is None or type(content) is str)
            and (tool_call_id is None or type(tool_call_id) is str) and (name is None or type(name) is str)):
        return None
    if tool_call_id is None and isinstance(data.get("tool_call_ids"), list) and data["tool_call_ids"]:
        return None
    calls: tuple[ToolCall, ...] = ()
    if role == "assistant":
        raw = data.get("tool_calls")
        if raw is not None:
            if type(raw) is not list:
                return None
            made = []
            for i, tc in enumerate(raw):
                fn = tc.get("function") if type(tc) is dict else None
                call_id = tc.get("id") if fn is not None else None
                if (type(fn) is not dict or type(fn.get("name")) is not str
                        or not (call_id is None or type(call_id) is str or type(call_id) is int)):
                    return None
                made.append(ToolCall(
                    id=f"call_{i}" if call_id is None else str(call_id),
                    name=fn["name"],
                    arguments=parse_arguments(fn.get("arguments"), msg.ctx,
                                              f"{msg.path}.tool_calls[{i}].function.arguments"),
                    requestor="assistant",
                ))
            calls = tuple(made)
    return Message(
        role=role,
        content=content,
        tool_calls=calls,
        tool_call_id=tool_call_id,
        name=name,
        requestor="assistant" if role == "tool" else None,
        meta={k: v for k, v in data.items() if k not in _KNOWN and k not in extra_known},
    )
