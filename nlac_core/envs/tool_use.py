"""Tool use on the tau2-bench ``mock`` domain: an agent, a simulated user, a database.

An episode follows tau2: the agent greets ("Hi! How can I help you today?")
unless the task brings a message history, and the simulated user — an LLM
given the task's ``user_scenario`` (persona and instructions) — answers. The
agent's action is a reply (plain text, answered by the user) or one tool call
(``TOOL_CALL: {...}``, answered by the tool's result, after which the agent
acts again). The user may call its own tools before replying (each call is one
more round of user generation, batched like the rest); those calls and results
are hidden from the agent, as in tau2. The episode ends when the user
writes ``###STOP###`` (``user_stop``), when the agent transfers to a human
(``agent_transfer``), or at the turn cap (``max_turns``, reward 0 as tau2
gives to episodes that did not end by themselves). Rewards: ``mock_domain``.

An action that is not valid (bad JSON, unknown tool, missing argument) is
recorded as written and answered with an ``Error: ...`` tool result, so the
episode goes on and the mistake stays visible in the trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from nlac_core.actions import ActionSpec, parse_tool_action, render_action
from nlac_core.backends.base import Backend, ChatRequest, SamplingSpec
from nlac_core.envs.base import EnvError, Environment, LLMQuery, StepResult, data_path, take
from nlac_core.envs.mock_domain import (
    AGENT_TOOL_DOCS,
    AGENT_TOOLS,
    TRANSFER_RESULT,
    USER_TOOL_DOCS,
    MockDomain,
    evaluate_episode,
)
from nlac_core.formats.base import Context, Obj
from nlac_core.formats.tau2_bench import parse_message, parse_task
from nlac_core.prompts import envs as env_prompts
from nlac_core.prompts import policy as policy_prompts
from nlac_core.prompts.base import Rendered
from nlac_core.records import Message, TaskRecord, ToolCall
from nlac_core.state import render_messages

DEFAULT_DOMAIN = "tau2-bench/domains/mock"
GREETING = "Hi! How can I help you today?"
SPLITS = ("graded", "base", "all")
MAX_TURNS = 20
MAX_USER_TOOL_CALLS = 3


class _Shared:
    """What sibling slots share: the domain's files, tasks and the simulated user."""

    def __init__(self, user: Backend, folder: Path, user_spec: SamplingSpec) -> None:
        self.user = user
        self.folder = folder
        self.user_spec = user_spec
        self.policy = (folder / "policy.md").read_text(encoding="utf-8").strip()
        self.initial = MockDomain.load(folder)
        raw = json.loads((folder / "tasks.json").read_text(encoding="utf-8"))
        if not isinstance(raw, list):
            raise EnvError(f"{folder / 'tasks.json'}: expected a list of tasks")
        ctx = Context(str(folder / "tasks.json"))
        self.raw_tasks = {str(t.get("id")): t for t in raw if isinstance(t, dict)}
        splits_file = folder / "split_tasks.json"
        self.splits: dict[str, list[str]] = {}
        if splits_file.is_file():
            self.splits = json.loads(splits_file.read_text(encoding="utf-8"))
        home: dict[str, str] = {}  # a task's own split: the first of split_tasks.json that lists it
        for name, ids in self.splits.items():
            unknown = [i for i in ids if i not in self.raw_tasks]
            if unknown:
                raise EnvError(f"{splits_file}: split {name!r} names unknown task(s) {', '.join(unknown)}")
            for task_id in ids:
                home.setdefault(task_id, name)
        self.tasks = [replace(parse_task(Obj(t, ctx, f"[{i}]")), split=home.get(str(t.get("id")), ""))
                      for i, t in enumerate(raw)]


def _graded(task: TaskRecord) -> bool:
    criteria = task.meta.get("evaluation_criteria") or {}
    return bool(criteria.get("actions") or criteria.get("env_assertions"))


def _tool_lines(docs: dict[str, str]) -> str:
    return "\n".join(f"- {doc}" for doc in docs.values())


def agent_view(history: Sequence[Message]) -> list[Message]:
    """What the agent sees: everything but the user's own tool calls and their results."""
    return [m for m in history if not (m.role == "user" and m.tool_calls) and m.requestor != "user"]


def user_chat(history: Sequence[Message]) -> list[tuple[str, str]]:
    """The conversation as the simulated user sees it, roles flipped: (role, text) with the agent's replies as
    "user" turns and the user's own messages, tool calls and tool results as its "assistant"/"user" turns.
    The agent's tool calls (and invalid actions, answered by an error, not by the user) are hidden, as in
    tau2; consecutive turns of one role are joined."""
    turns: list[tuple[str, str]] = []

    def add(role: str, text: str) -> None:
        if turns and turns[-1][0] == role:
            turns[-1] = (role, turns[-1][1] + "\n\n" + text)
        else:
            turns.append((role, text))

    for m in history:
        if m.role == "assistant":
            if (m.content or "").strip() and not m.tool_calls and "action_error" not in m.meta:
                add("user", m.content.strip())
        elif m.role == "user":
            parts = [m.content.strip()] if (m.content or "").strip() else []
            parts += [render_action(None, call) for call in m.tool_calls]
            if parts:
                add("assistant", "\n".join(parts))
        elif m.role == "tool" and m.requestor == "user":
            add("user", f"TOOL RESULT: {m.content or ''}")
    return turns


class ToolUseEnv(Environment):
    name = "tool_use"
    policy_template = policy_prompts.TOOL_USE
    default_max_new_tokens = 128
    action_spec = ActionSpec("tool_use", AGENT_TOOLS)

    def __init__(self, user: Backend, domain_dir: str | Path | None = None, max_turns: int = MAX_TURNS,
                 user_spec: SamplingSpec | None = None, max_user_tool_calls: int = MAX_USER_TOOL_CALLS,
                 _shared: _Shared | None = None) -> None:
        super().__init__()
        if max_turns < 1:
            raise EnvError(f"tool_use: max_turns must be at least 1, got {max_turns}")
        self.max_turns = max_turns
        self.max_user_tool_calls = max_user_tool_calls
        self._shared = _shared or _Shared(user, data_path(domain_dir, DEFAULT_DOMAIN, "tau2-bench mock domain"),
                                          user_spec or SamplingSpec(max_new_tokens=96))
        self.domain: MockDomain = self._shared.initial.copy()
        self.initial: MockDomain = self.domain.copy()

    @property
    def env_models(self) -> str:
        return self._shared.user.model

    @property
    def env_llm(self) -> dict[str, Any]:
        shared = self._shared
        return {"role": "simulated_user", "backend": shared.user.name, "model": shared.user.model,
                "sampling": shared.user_spec.to_dict()}

    @property
    def policy_text(self) -> str:
        return self._shared.policy

    def spawn(self) -> ToolUseEnv:
        return ToolUseEnv(self._shared.user, max_turns=self.max_turns, max_user_tool_calls=self.max_user_tool_calls,
                          _shared=self._shared)

    def tasks(self, split: str = "", limit: int | None = None) -> list[TaskRecord]:
        """``graded`` (default: the base split less tasks without gold actions or assertions), a split of
        split_tasks.json (``base``), or ``all``; a task's own ``split`` is the file's split that lists it."""
        split = split or "graded"
        shared = self._shared
        if split == "all":
            chosen = shared.tasks
        elif split == "graded" or split in shared.splits:
            ids = shared.splits.get("base", list(shared.raw_tasks)) if split == "graded" else shared.splits[split]
            by_id = {t.external_id: t for t in shared.tasks}
            chosen = [by_id[i] for i in ids]
            if split == "graded":
                chosen = [t for t in chosen if _graded(t)]
        else:
            known = sorted({*SPLITS, *shared.splits})
            raise EnvError(f"tool_use: unknown split {split!r}; known: {', '.join(known)}")
        return take(chosen, limit, "tool_use")

    def render_policy(self, task: TaskRecord, history: Sequence[Message]) -> Rendered:
        return self.policy_template.render(policy=self._shared.policy, tools=_tool_lines(AGENT_TOOL_DOCS),
                                           state=render_messages(agent_view(history)))

    # -- episode ---------------------------------------------------------------------------------------------

    def _reset(self, task: TaskRecord):
        history = self._start(task)
        self.messages.extend(history)
        if not history:
            self.messages.append(Message(role="assistant", content=GREETING, meta={"scripted": True}))
        last = self.messages[-1]
        if last.role == "assistant" and not last.tool_calls:
            text, stopped = yield from self._user_turn()
            if stopped:
                reward, _ = self._settle("user_stop")
                self.total_reward += reward  # no step adds it: the episode ended before the agent acted
            return text
        return last.content or ""

    def _start(self, task: TaskRecord) -> list[Message]:
        """The database in the task's initial state (data, actions, the history's tool calls); returns the
        message history the task starts from (tau2's ``initial_state.message_history``)."""
        state = task.meta.get("initial_state") or {}
        ctx = Context(str(self._shared.folder / "tasks.json"), f"task {task.external_id}")
        history = [parse_message(Obj(m, ctx, f"initial_state.message_history[{i}]"))
                   for i, m in enumerate(state.get("message_history") or [])]
        self.domain = self._shared.initial.copy()
        self.domain.initialize(state, history, f"tool_use task {task.external_id}")
        self.initial = self.domain.copy()
        return history

    def _restore(self, task: TaskRecord, prefix: list[Message]) -> None:
        """The database after ``prefix``: the task's initial state and history, then every tool call the prefix
        executed (the agent's valid calls and the user's own), in order."""
        history = self._start(task)
        for message in prefix[len(history):]:
            if message.role == "assistant" and message.meta.get("action_error"):
                continue  # refused before it ran
            for call in message.tool_calls:
                self.domain.call(call.name, call.arguments, "user" if message.role == "user" else "assistant")

    def _step(self, action_text: str):
        text = (action_text or "").strip()
        check = self.action_spec.check(text)
        action = check.action
        call_id = f"call_{len(self.messages)}"
        if action is None:  # not even parseable: recorded as written, answered with the error
            self.messages.append(Message(role="assistant", content=text, turn_idx=self.turns - 1,
                                         meta={"reward": 0.0, "action_error": check.error}))
            observation = f"Error: {check.error}"
            self.messages.append(Message(role="tool", content=observation, requestor="assistant",
                                         turn_idx=self.turns - 1))
            return self._after(StepResult(observation, 0.0, False, {"error": check.error}))
        if action.tool_call is not None:
            call = ToolCall(call_id, action.tool_call.name, action.tool_call.arguments)
            meta: dict[str, Any] = {"reward": 0.0} if check.ok else {"reward": 0.0, "action_error": check.error}
            self.messages.append(Message(role="assistant", content=action.text or None, tool_calls=(call,),
                                         turn_idx=self.turns - 1, meta=meta))
            result = self.domain.call(call.name, call.arguments) if check.ok else f"Error: {check.error}"
            self.messages.append(Message(role="tool", content=result, tool_call_id=call_id, name=call.name,
                                         requestor="assistant", turn_idx=self.turns - 1))
            info = {"tool": call.name, "error": result[len("Error: "):]} if result.startswith("Error:") else {
                "tool": call.name}
            if call.name == "transfer_to_human_agents" and result == TRANSFER_RESULT:
                reward, reward_info = self._settle("agent_transfer")
                return StepResult(result, reward, True, {**info, "reward_info": reward_info})
            return self._after(StepResult(result, 0.0, False, info))
        self.messages.append(Message(role="assistant", content=action.text, turn_idx=self.turns - 1,
                                     meta={"reward": 0.0}))
        reply, stopped = yield from self._user_turn()
        if stopped:
            reward, reward_info = self._settle("user_stop")
            return StepResult(reply, reward, True, {"reward_info": reward_info})
        return self._after(StepResult(reply, 0.0, False, {}))

    def _user_turn(self):
        """The simulated user's next message (after any tool calls of its own); (text, stopped)."""
        assert self.task is not None
        scenario = self.task.meta.get("user_scenario") or {}
        instructions = self.task.instruction or str(scenario.get("instructions") or "")
        persona = str(scenario.get("persona") or "An ordinary user of the service.")
        turn = self.turns - 1 if self.turns else None
        for attempt in range(self.max_user_tool_calls + 1):
            rendered = self._user_prompt(persona, instructions)
            completions = yield LLMQuery(self._shared.user, (ChatRequest(rendered.messages),), self._shared.user_spec)
            self.count("user", completions)
            text = completions[0].text.strip()
            action, _ = parse_tool_action(text)
            if action is not None and action.tool_call is not None and attempt < self.max_user_tool_calls:
                call = ToolCall(f"call_{len(self.messages)}", action.tool_call.name, action.tool_call.arguments,
                                requestor="user")
                self.messages.append(Message(role="user", content=action.text or None, tool_calls=(call,),
                                             turn_idx=turn, meta={"prompt_id": rendered.prompt_id}))
                self.messages.append(Message(role="tool", content=self.domain.call(call.name, call.arguments, "user"),
                                             tool_call_id=call.id, name=call.name, requestor="user", turn_idx=turn))
                continue
            self.messages.append(Message(role="user", content=text, turn_idx=turn,
                                         meta={"prompt_id": rendered.prompt_id}))
            return text, env_prompts.STOP_TOKEN in text
        raise AssertionError("unreachable: the last attempt always returns")

    def _user_prompt(self, persona: str, instructions: str) -> Rendered:
        """System text and scenario, then the conversation with roles flipped (see ``prompts.envs``)."""
        scenario = env_prompts.USER_SIMULATOR.render(persona=persona, instructions=instructions,
                                                     tools=_tool_lines(USER_TOOL_DOCS))
        system = "\n\n".join(m["content"] for m in scenario.messages)
        chat = [{"role": role, "content": text} for role, text in user_chat(self.messages)]
        if not chat or chat[0]["role"] != "user":  # a chat starts with a user turn: the agent has not spoken
            chat.insert(0, {"role": "user", "content": "(The agent is waiting for you to start.)"})
        return Rendered([{"role": "system", "content": system}, *chat], scenario.prompt_id)

    def _after(self, result: StepResult) -> StepResult:
        if self.turns >= self.max_turns:
            self.truncate("max_turns")
            return StepResult(result.observation, result.reward, True, {**result.info, "truncated": True})
        return result

    def _settle(self, reason: str) -> tuple[float, dict[str, Any]]:
        """End the episode with its reward by database comparison; returns (reward, breakdown)."""
        assert self.task is not None
        reward, info = evaluate_episode(self.task.meta.get("evaluation_criteria"), self.initial, self.domain,
                                        self.messages)
        self._finish(reason, {"success": reward >= 1.0, "reward": reward, **info})
        return reward, self.reward_info

    def _truncated_reward_info(self, reason: str) -> dict[str, Any]:
        info = super()._truncated_reward_info(reason)
        if self.task is not None:  # what the database comparison would have said, for the record
            would, _ = evaluate_episode(self.task.meta.get("evaluation_criteria"), self.initial, self.domain,
                                        self.messages)
            info["would_have_scored"] = would
        return info
