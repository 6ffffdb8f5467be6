"""The tau2-bench ``mock`` domain: its database, its tools, and reward by database comparison.

We implement the domain's tools ourselves from its policy and tasks (nothing of
tau2 is imported). The agent has ``get_users``, ``get_task``, ``create_task``,
``update_task_status`` and ``transfer_to_human_agents``; the simulated user has
``check_notifications`` and ``dismiss_notification`` on a database of its own.
The policy's rules are enforced by the tools: a task needs a title, a status is
"pending" or "completed", only existing users get tasks, and there is no way
to delete a task (the agent must transfer to a human instead). A tool result
is a JSON string; a refused call returns ``"Error: ..."`` and changes nothing.

Reward follows tau2's environment evaluator: replay the task's gold actions on
a fresh copy of the initial state and compare the agent database's hash with
the episode's (1.0 when equal); check ``env_assertions`` on the episode's
state; check that the gold actions were called when the task's
``reward_basis`` asks for ACTION. The reward is the product of the components
the task's basis names (tau2's default basis is DB and COMMUNICATE); the
natural-language components (COMMUNICATE, NL_ASSERTION) need a judge and are
listed as not checked. The user's database is left out of the hash
comparison: the user's own actions are not in the gold replay, so comparing it
would fail every correct episode of the user-tools task; env_assertions check
the user's side instead. A task with neither gold actions nor env assertions
gets tau2's vacuous 1.0, marked ``graded: false``; such tasks are left out of
the default split (``graded``).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlac_core.records import Message, canonical_json

AGENT_TOOLS: dict[str, tuple[str, ...]] = {
    "get_users": (),
    "get_task": ("task_id",),
    "create_task": ("user_id", "title"),
    "update_task_status": ("task_id", "status"),
    "transfer_to_human_agents": ("summary",),
}
AGENT_TOOL_DOCS = {
    "get_users": "get_users(): list every user with their task ids",
    "get_task": "get_task(task_id): the task with this id",
    "create_task": "create_task(user_id, title, description?): create a pending task for an existing user",
    "update_task_status": "update_task_status(task_id, status): set a task's status to \"pending\" or \"completed\"",
    "transfer_to_human_agents": ("transfer_to_human_agents(summary): hand the user over to a human agent, with a "
                                 "summary of their request (ends the conversation)"),
}
OPTIONAL_ARGS = {"create_task": ("description",)}
USER_TOOLS: dict[str, tuple[str, ...]] = {"check_notifications": (), "dismiss_notification": ("notification_id",)}
USER_TOOL_DOCS = {
    "check_notifications": "check_notifications(): list your notifications",
    "dismiss_notification": "dismiss_notification(notification_id): mark a notification as read",
}
STATUSES = ("pending", "completed")
TRANSFER_RESULT = "Transfer successful"
DEFAULT_BASIS = ("DB", "COMMUNICATE")
CHECKED_BASIS = ("DB", "ENV_ASSERTION", "ACTION")


class ToolError(Exception):
    """A refused tool call; its message becomes the ``Error: ...`` result."""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> None:
    """Merge ``update`` into ``base`` in place: objects merge key by key, anything else is replaced."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


@dataclass
class MockDomain:
    """The state of one episode: the agent's database and the user's."""

    db: dict[str, Any]
    user_db: dict[str, Any]

    @classmethod
    def load(cls, folder: Path) -> MockDomain:
        return cls(json.loads((folder / "db.json").read_text(encoding="utf-8")),
                   json.loads((folder / "user_db.json").read_text(encoding="utf-8")))

    def copy(self) -> MockDomain:
        return MockDomain(copy.deepcopy(self.db), copy.deepcopy(self.user_db))

    def db_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.db).encode()).hexdigest()

    def user_db_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.user_db).encode()).hexdigest()

    # -- calling tools -------------------------------------------------------------------------------------

    def call(self, name: str, arguments: dict[str, Any], requestor: str = "assistant") -> str:
        """Run a tool; the result text the caller sees (``Error: ...`` when refused)."""
        tools = AGENT_TOOLS if requestor == "assistant" else USER_TOOLS
        if name not in tools:
            return f"Error: unknown tool {name!r}; known: {', '.join(sorted(tools))}"
        allowed = set(tools[name]) | set(OPTIONAL_ARGS.get(name, ()))
        unexpected = sorted(set(arguments) - allowed)
        missing = [a for a in tools[name] if a not in arguments]
        if missing or unexpected:
            problems = ([f"missing argument(s) {', '.join(missing)}"] if missing else []) + (
                [f"unexpected argument(s) {', '.join(unexpected)}"] if unexpected else [])
            return f"Error: {name}: {'; '.join(problems)}"
        try:
            return getattr(self, f"_tool_{name}")(**arguments)
        except ToolError as exc:
            return f"Error: {exc}"

    def _task(self, task_id: Any) -> dict[str, Any]:
        if not isinstance(task_id, str) or task_id not in self.db["tasks"]:
            raise ToolError(f"task {task_id!r} not found")
        return self.db["tasks"][task_id]

    def _tool_get_users(self) -> str:
        return _json(list(self.db["users"].values()))

    def _tool_get_task(self, task_id: Any) -> str:
        return _json(self._task(task_id))

    def _tool_create_task(self, user_id: Any, title: Any, description: Any = None) -> str:
        if not isinstance(user_id, str) or user_id not in self.db["users"]:
            raise ToolError(f"user {user_id!r} not found; only existing users can create tasks")
        if not isinstance(title, str) or not title.strip():
            raise ToolError("each task must have a title")
        if description is not None and not isinstance(description, str):
            raise ToolError("the description must be a string")
        n = len(self.db["tasks"]) + 1
        while f"task_{n}" in self.db["tasks"]:
            n += 1
        task = {"task_id": f"task_{n}", "title": title, "description": description, "status": "pending"}
        self.db["tasks"][task["task_id"]] = task
        self.db["users"][user_id].setdefault("tasks", []).append(task["task_id"])
        return _json(task)

    def _tool_update_task_status(self, task_id: Any, status: Any) -> str:
        task = self._task(task_id)
        if status not in STATUSES:
            raise ToolError(f"status must be \"pending\" or \"completed\", got {status!r}")
        task["status"] = status
        return _json(task)

    def _tool_transfer_to_human_agents(self, summary: Any) -> str:
        if not isinstance(summary, str):
            raise ToolError("the summary must be a string")
        return TRANSFER_RESULT

    def _notification(self, notification_id: Any) -> dict[str, Any]:
        notifications = self.user_db.setdefault("notifications", {})
        if not isinstance(notification_id, str) or notification_id not in notifications:
            raise ToolError(f"notification {notification_id!r} not found")
        return notifications[notification_id]

    def _tool_check_notifications(self) -> str:
        return _json(list(self.user_db.get("notifications", {}).values()))

    def _tool_dismiss_notification(self, notification_id: Any) -> str:
        notification = self._notification(notification_id)
        notification["status"] = "read"
        return _json(notification)

    # -- initial state and assertions ---------------------------------------------------------------------

    def add_notification(self, notification_id: str, message: str, task_id: str | None = None) -> None:
        """An initialization action on the user's side (not a tool the user can call)."""
        self.user_db.setdefault("notifications", {})[notification_id] = {
            "notification_id": notification_id, "message": message, "status": "unread", "task_id": task_id}

    def initialize(self, initial_state: dict[str, Any] | None, history: list[Message], where: str) -> None:
        """Apply a task's ``initial_state``: data merged in, actions run, then the history's tool calls replayed."""
        state = initial_state or {}
        data = state.get("initialization_data") or {}
        deep_merge(self.db, data.get("agent_data") or {})
        deep_merge(self.user_db, data.get("user_data") or {})
        for i, action in enumerate(state.get("initialization_actions") or []):
            name, arguments = action.get("func_name"), action.get("arguments") or {}
            side = action.get("env_type", "assistant")
            if side == "user" and name == "add_notification":
                self.add_notification(**arguments)
                continue
            result = self.call(name, arguments, "assistant" if side == "assistant" else "user")
            if result.startswith("Error:"):
                raise ValueError(f"{where}: initialization_actions[{i}] ({name}) failed: {result}")
        for message in history:
            for call in message.tool_calls:
                self.call(call.name, call.arguments, call.requestor)

    def check_assertion(self, assertion: dict[str, Any]) -> bool:
        name, arguments = assertion.get("func_name"), assertion.get("arguments") or {}
        if name == "assert_task_status":
            task = self.db["tasks"].get(arguments.get("task_id"))
            value = task is not None and task.get("status") == arguments.get("expected_status")
        elif name == "assert_notification_status":
            notification = self.user_db.get("notifications", {}).get(arguments.get("notification_id"))
            value = notification is not None and notification.get("status") == arguments.get("expected_status")
        else:
            raise ValueError(f"unknown env assertion {name!r}")
        return value == assertion.get("assert_value", True)


def _called(gold: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> bool:
    """tau2's action check: some agent call has the gold name and the gold values of its ``compare_args``."""
    keys = gold.get("compare_args")
    keys = list(gold.get("arguments") or {}) if keys is None else keys
    return any(name == gold.get("name") and all(args.get(k) == (gold.get("arguments") or {}).get(k) for k in keys)
               for name, args in calls)


def evaluate_episode(criteria: dict[str, Any] | None, initial: MockDomain, final: MockDomain,
                     messages: list[Message] | tuple[Message, ...]) -> tuple[float, dict[str, Any]]:
    """The reward of an episode and its breakdown (see the module docstring)."""
    criteria = criteria or {}
    gold_actions = criteria.get("actions") or []
    assertions = criteria.get("env_assertions") or []
    basis = list(criteria.get("reward_basis") or DEFAULT_BASIS)
    info: dict[str, Any] = {"reward_basis": basis, "not_checked": [b for b in basis if b not in CHECKED_BASIS]}
    if criteria.get("nl_assertions"):
        info["nl_assertions_not_checked"] = list(criteria["nl_assertions"])
    if not gold_actions and not assertions:
        info.update(graded=False, note="no gold actions or env assertions: tau2's vacuous reward 1.0")
        return 1.0, info
    info["graded"] = True
    gold = initial.copy()
    for action in gold_actions:
        gold.call(action["name"], action.get("arguments") or {}, action.get("requestor", "assistant"))
    components: dict[str, float] = {}
    match = gold.db_hash() == final.db_hash()
    info["db"] = {"match": match, "gold_hash": gold.db_hash()[:16], "episode_hash": final.db_hash()[:16]}
    if "DB" in basis:
        components["DB"] = 1.0 if match else 0.0
    if assertions:
        results = [{"func_name": a.get("func_name"), "arguments": a.get("arguments"), "met": final.check_assertion(a)}
                   for a in assertions]
        info["env_assertions"] = results
        if "ENV_ASSERTION" in basis:
            components["ENV_ASSERTION"] = 1.0 if all(r["met"] for r in results) else 0.0
    if "ACTION" in basis:
        calls = [(c.name, c.arguments) for m in messages if m.role == "assistant" for c in m.tool_calls]
        checks = [{"name": a.get("name"), "matched": _called(a, calls)} for a in gold_actions]
        info["actions"] = checks
        components["ACTION"] = 1.0 if all(c["matched"] for c in checks) else 0.0
    reward = 1.0
    for value in components.values():
        reward *= value
    info["components"] = components
    return reward, info
