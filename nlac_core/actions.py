"""Actions in the policy's output format, and their validation.

An agent action is text the policy writes. In tool-use environments an action
is either a reply to the user (plain text) or one tool call written as

    TOOL_CALL: {"name": "update_task_status", "arguments": {"task_id": "task_1", "status": "completed"}}

In 20 Questions an action is one yes/no question (or a guess, which is a
question naming the object); in MATH a full solution ending in a boxed answer.
Rendering an imported step (a :class:`~nlac_core.records.Message`) and parsing
a generated one go through this module, so a refinement is checked against the
same format the policy was prompted with.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from nlac_core.mathanswer import extract_boxed
from nlac_core.records import Message, ToolCall

TOOL_CALL_PREFIX = "TOOL_CALL:"


@dataclass(frozen=True)
class Action:
    """A parsed action: a reply text, a tool call, or both (text before the call)."""

    text: str = ""
    tool_call: ToolCall | None = None

    def render(self) -> str:
        return render_action(self.text, self.tool_call)

    def to_message(self) -> Message:
        calls = (self.tool_call,) if self.tool_call else ()
        return Message(role="assistant", content=self.text or None, tool_calls=calls)


@dataclass(frozen=True)
class ActionCheck:
    """The verdict of a validator: ``ok`` with the parsed action, or the reason it is not."""

    ok: bool
    action: Action | None = None
    error: str = ""


@dataclass(frozen=True)
class ActionSpec:
    """What a valid action looks like in one environment.

    ``kind`` is ``tool_use``, ``twenty_questions`` or ``math``; ``tools`` maps
    each known tool name to its required argument names (tool-use only).
    """

    kind: str
    tools: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def check(self, text: str) -> ActionCheck:
        return {"tool_use": _check_tool_use, "twenty_questions": _check_question,
                "math": _check_math}[self.kind](self, text)


def render_action(text: str | None, tool_call: ToolCall | None) -> str:
    parts = [text.strip()] if text and text.strip() else []
    if tool_call is not None:
        parts.append(f"{TOOL_CALL_PREFIX} " + json.dumps({"name": tool_call.name, "arguments": tool_call.arguments},
                                                          ensure_ascii=False))
    return "\n".join(parts)


def render_message_action(message: Message) -> str:
    """An imported assistant step in the policy's output format (one line per tool call)."""
    parts = [message.content.strip()] if message.content and message.content.strip() else []
    for call in message.tool_calls:
        parts.append(render_action(None, call))
    return "\n".join(parts)


def parse_tool_action(text: str) -> tuple[Action | None, str]:
    """Parse text in the tool-use format. Returns (action, error); error is empty on success."""
    text = (text or "").strip()
    if not text:
        return None, "the action is empty"
    index = text.find(TOOL_CALL_PREFIX)
    if index < 0:
        return Action(text=text), ""
    before, payload = text[:index].strip(), text[index + len(TOOL_CALL_PREFIX):].strip()
    try:
        data, _ = json.JSONDecoder().raw_decode(payload)
    except json.JSONDecodeError as exc:
        return None, f"the tool call is not valid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None, 'the tool call must be an object with a "name" string'
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None, "the tool call's arguments are not a JSON object"
    if not isinstance(arguments, dict):
        return None, "the tool call's arguments must be a JSON object"
    return Action(text=before, tool_call=ToolCall(id="", name=data["name"], arguments=arguments)), ""


def _check_tool_use(spec: ActionSpec, text: str) -> ActionCheck:
    action, error = parse_tool_action(text)
    if action is None:
        return ActionCheck(False, error=error)
    call = action.tool_call
    if call is not None and not spec.tools:  # nothing to check a name against: never accepted blindly
        return ActionCheck(False, action, f"no tools are known here, so tool call {call.name!r} cannot be checked "
                                          "(give the tool schemas, e.g. refine --tools)")
    if call is not None:
        if call.name not in spec.tools:
            return ActionCheck(False, action, f"unknown tool {call.name!r}; known: {', '.join(sorted(spec.tools))}")
        missing = [a for a in spec.tools[call.name] if a not in call.arguments]
        if missing:
            return ActionCheck(False, action, f"tool {call.name!r} is missing argument(s): {', '.join(missing)}")
    return ActionCheck(True, action)


_QUESTION_START = re.compile(
    r"^(is|are|was|were|does|do|did|can|could|would|will|should|has|have|had|might|may)\b", re.IGNORECASE)


def _check_question(spec: ActionSpec, text: str) -> ActionCheck:
    """One yes/no question: starts like one and ends with a question mark."""
    question = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    if not question:
        return ActionCheck(False, error="the question is empty")
    if not question.endswith("?"):
        return ActionCheck(False, error="a 20 Questions action must be one question ending with '?'")
    if not _QUESTION_START.match(question):
        return ActionCheck(False, error="a 20 Questions action must be a yes/no question (Is/Does/Can ...?)")
    return ActionCheck(True, Action(text=question))


def _check_math(spec: ActionSpec, text: str) -> ActionCheck:
    if not (text or "").strip():
        return ActionCheck(False, error="the solution is empty")
    if extract_boxed(text) is None:
        return ActionCheck(False, error="a MATH solution must end with its answer in \\boxed{...}")
    return ActionCheck(True, Action(text=text.strip()))


def tool_spec_from_schemas(schemas: list[dict[str, Any]]) -> ActionSpec:
    """ActionSpec from OpenAI function schemas (tau-bench's ``*_tools.json``)."""
    tools = {}
    for schema in schemas:
        fn = schema.get("function", schema)
        tools[fn["name"]] = tuple(fn.get("parameters", {}).get("required", ()))
    return ActionSpec("tool_use", tools)


def tool_spec_from_names(names) -> ActionSpec:
    """ActionSpec knowing only tool names (the tools a stored trajectory used)."""
    return ActionSpec("tool_use", {name: () for name in sorted(names)})
