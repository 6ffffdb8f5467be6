"""Generated tasks for the tau2-bench ``mock`` domain, in tau2's own task schema.

tau2's mock domain has ten tasks (nine graded): too few to fit a runtime critic on
one half and measure it on the other. The tasks here are procedurally generated
from a seed — they are ours, not tau2's — and look like the domain's own: a user
asks the agent to create tasks or change their status. Kinds, in turn:

- ``create``: a new task with a title (sometimes a description) for the user; a
  user who gives only their name leaves the agent to look them up (``get_users``);
- ``update``: mark one of the user's tasks completed, or back to pending;
- ``update_two``: change the status of two tasks;
- ``update_create``: change one task's status and create a new task;
- ``ask_update``: the user first asks what a task's status is, then wants it the
  other way round, so the agent must read it (``get_task``) before writing.

Each task brings its state in ``initial_state.initialization_data``: one new user
(a name from small word lists) and their tasks, beside the domain's ``user_1`` and
``task_1``, so it plays on the domain's db.json unchanged. The gold actions are
exactly what solves it; the reward compares the database with their replay
(``reward_basis`` DB, plus ACTION for ``ask_update`` so that the read counts).
"""

from __future__ import annotations

import random
from typing import Any

KINDS = ("create", "update", "update_two", "update_create", "ask_update")
FIRST_NAMES = ("Maria", "James", "Aisha", "Kenji", "Sofia", "Daniel", "Priya", "Lucas", "Elena", "Omar", "Hannah",
               "Mateo", "Grace", "Tomas", "Leila", "Noah")
LAST_NAMES = ("Lopez", "Carter", "Okafor", "Tanaka", "Rossi", "Nguyen", "Sharma", "Berg", "Novak", "Haddad",
              "Schmidt", "Silva", "Kim", "Dubois", "Walsh", "Moreau")
TITLES = ("Book dentist appointment", "Renew passport", "Prepare quarterly report", "Call the landlord",
          "Submit expense claims", "Plan team offsite", "Update resume", "Pay electricity bill",
          "Review pull requests", "Order office supplies", "Schedule car service", "Write blog post",
          "Back up laptop", "Send birthday card", "Clean up inbox", "Draft project proposal",
          "Organize kickoff meeting", "File tax return", "Buy groceries", "Fix the leaking tap")
DESCRIPTIONS = ("Before the end of the month", "Ask Sam for the numbers first", "Use the new template",
                "Check the calendar for a free slot", "Keep the receipts", "High priority", "Needs two hours",
                "Coordinate with the design team")
PERSONAS = ("Professional and direct communicator who writes in a clear and concise style",
            "Friendly and a little chatty, but clear about what they want", "Busy and brief; writes short messages",
            "Polite and careful; double-checks details")


def _action(action_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"action_id": action_id, "name": name, "arguments": arguments}


def _flip(status: str) -> str:
    return "pending" if status == "completed" else "completed"


def _ask_for(task: dict[str, Any], status: str) -> tuple[str, str]:
    """What the user says they want for one of their tasks, and the ticket's line for it."""
    label = f"{task['task_id']} ('{task['title']}')"
    if status == "completed":
        return (f"your task {label} is done, so ask the agent to mark it as completed",
                f"mark {task['task_id']} as completed")
    return (f"your task {label} is not finished after all, so ask the agent to set it back to pending",
            f"set {task['task_id']} back to pending")


def _one(rng: random.Random, kind: str, index: int, seed: int) -> dict[str, Any]:
    user_id = f"user_{rng.randint(2, 99)}"
    name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
    titles = rng.sample(TITLES, 4)
    count = 2 if kind in ("update_two", "update_create") else rng.randint(1, 3)
    owned = [{"task_id": f"task_{2 + i}", "title": titles[i], "description": rng.choice((None, *DESCRIPTIONS)),
              "status": rng.choice(("pending", "completed"))} for i in range(count)]
    new_title, description = titles[3], rng.choice(DESCRIPTIONS) if rng.random() < 0.4 else None
    who = f"You are {name}, user id {user_id}."
    actions: list[dict[str, Any]] = []
    goals: list[tuple[str, str]] = []  # (what the user is told, the ticket's line)
    basis = ["DB"]

    if kind in ("update", "update_two", "update_create"):
        for task in owned[:2 if kind == "update_two" else 1]:
            status = _flip(task["status"])
            actions.append(_action(f"update_{len(actions) + 1}", "update_task_status", task_id=task["task_id"],
                                   status=status))
            goals.append(_ask_for(task, status))
    if kind == "ask_update":
        task = owned[0]
        actions += [_action("get_1", "get_task", task_id=task["task_id"]),
                    _action("update_1", "update_task_status", task_id=task["task_id"], status=_flip(task["status"]))]
        goals.append((f"you do not remember whether your task {task['task_id']} ('{task['title']}') is done: first "
                      "ask the agent what its status is; if it is pending, ask to mark it completed, and if it is "
                      "completed, ask to set it back to pending",
                      f"tell them the status of {task['task_id']}, then switch it to {_flip(task['status'])}"))
        basis = ["DB", "ACTION"]
    if kind in ("create", "update_create"):
        arguments = {"user_id": user_id, "title": new_title, **({"description": description} if description else {})}
        actions.append(_action("create_1", "create_task", **arguments))
        detail = f"with the description '{description}'" if description else "with no description"
        goals.append((f"ask the agent to create a new task titled '{new_title}' for you, {detail} (give the title "
                      "exactly as written here)", f"create a task '{new_title}' {detail}"))
        if kind == "create" and rng.random() < 0.35:
            who = f"You are {name}. You do not know your user id; if asked, give your full name."

    return {
        "id": f"synthetic_{kind}_{index:03d}",
        "description": {"purpose": f"Generated {kind} task", "notes": f"nlac_core.envs.mock_tasks, seed {seed}; "
                                                                        "not one of tau2-bench's tasks"},
        "user_scenario": {"persona": rng.choice(PERSONAS),
                          "instructions": f"{who} Your goal: {'; then '.join(g for g, _ in goals)}."},
        "ticket": f"User {name} ({user_id}) wants the agent to {'; then '.join(t for _, t in goals)}.",
        "initial_state": {"initialization_data": {"agent_data": {
            "users": {user_id: {"user_id": user_id, "name": name, "tasks": [t["task_id"] for t in owned]}},
            "tasks": {t["task_id"]: t for t in owned}}}},
        "evaluation_criteria": {"actions": actions, "reward_basis": basis},
    }


def synthetic_tasks(n: int = 60, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` raw tau2 task dicts (kinds in turn), the same for the same seed."""
    rng = random.Random(seed)
    return [_one(rng, KINDS[i % len(KINDS)], i, seed) for i in range(n)]
