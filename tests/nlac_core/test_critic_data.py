"""The runtime critic's data pipeline on hand-built episodes of the real tau2 mock tasks.

Tasks come from the environment (``ToolUseEnv(...).tasks("graded")``) so that the gold actions are the real
ones; the episodes are written by hand so that each test knows its answer. Step 0 is the scripted greeting.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.critic_data import (
    FirstError,
    RuntimeLabel,
    TaskDifficulty,
    first_error,
    hard_tasks,
    runtime_labels,
    unlocalised,
)
from nlac_core.envs import make_env
from nlac_core.envs.tool_use import GREETING, ToolUseEnv
from nlac_core.prompts.nlac import FIRST_ERROR_FEEDBACK
from nlac_core.records import Message, TaskRecord, ToolCall, TrajectoryRecord
from tests.conftest import needs_shared

pytestmark = needs_shared

DONE = {"task_id": "task_1", "status": "completed"}


@pytest.fixture(scope="module")
def tasks() -> dict[str, TaskRecord]:
    env = ToolUseEnv(user=FakeBackend(model="scripted-user", reply="###STOP###"))
    return {t.external_id: t for t in env.tasks("graded")}


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(f"call_{name}", name, arguments)


def episode(task: TaskRecord, *actions: str | ToolCall | Message, reward: float | None = 0.0,
            ending: str = "user_stop", trial: int = 0) -> TrajectoryRecord:
    """Greeting, the user's request, then each action: a reply (answered by the user), a tool call (answered
    by its result) or a ready-made assistant message (an invalid action)."""
    messages = [Message("assistant", GREETING, meta={"scripted": True}), Message("user", "Please help me.")]
    for action in actions:
        if isinstance(action, Message):
            messages += [action, Message("tool", "Error: refused", requestor="assistant")]
        elif isinstance(action, ToolCall):
            messages += [Message("assistant", tool_calls=(action,)),
                         Message("tool", "{}", tool_call_id=action.id, name=action.name, requestor="assistant")]
        else:
            messages += [Message("assistant", action), Message("user", "OK.")]
    return TrajectoryRecord(task=task, messages=tuple(messages), trial=trial, reward=reward,
                            termination_reason=ending)


def rendered(tool_call: ToolCall) -> str:
    return "TOOL_CALL: " + json.dumps({"name": tool_call.name, "arguments": tool_call.arguments})


def test_it_labels_tasks_by_their_self_play_successes(tasks):
    update, create, transfer = tasks["update_task_1"], tasks["create_task_1"], tasks["impossible_task_1"]
    runs = [episode(update, reward=0.0), episode(create, reward=1.0), episode(update, reward=0.0, trial=1),
            episode(create, reward=0.0, trial=1), episode(transfer, reward=1.0), episode(create, reward=None),
            replace(episode(create, reward=0.0, trial=2), reward_info={"success": True}),  # the env's word wins
            episode(transfer, reward=1.0, trial=1)]
    assert hard_tasks(runs) == [TaskDifficulty("update_task_1", 0, 2, True, "unsolved"),
                                TaskDifficulty("create_task_1", 2, 3, True, "unreliable"),
                                TaskDifficulty("impossible_task_1", 2, 2, False, "solved")]
    assert [(d.task_id, d.successes, d.episodes, d.label) for d in hard_tasks(runs, k=1)] == [
        ("update_task_1", 0, 1, "unsolved"), ("create_task_1", 1, 1, "solved"), ("impossible_task_1", 1, 1, "solved")]
    with pytest.raises(ValueError):
        hard_tasks(runs, k=0)


def test_it_finds_the_first_error_at_a_wrong_status(tasks):
    task = tasks["update_task_1"]
    wrong = call("update_task_status", task_id="task_1", status="pending")
    run = episode(task, call("get_users"), call("get_task", task_id="task_1"), wrong, "Done.")
    gold = task.meta["evaluation_criteria"]["actions"][0]
    assert first_error(run) == FirstError(3, rendered(wrong), gold, "wrong status for update_task_status")


def test_it_finds_no_error_in_a_correct_episode_or_without_gold(tasks):
    task = tasks["update_task_1"]
    correct = episode(task, call("get_task", task_id="task_1"), call("update_task_status", **DONE), "Done.",
                      reward=1.0)
    assert first_error(correct) is None
    on_path = replace(correct, reward=0.0)  # failed for a reason the gold path does not show
    assert first_error(on_path) is None
    no_gold = tasks["update_task_with_history_and_env_assertions"]
    assert not no_gold.meta["evaluation_criteria"].get("actions")
    assert first_error(episode(no_gold, call("update_task_status", task_id="task_2", status="pending"))) is None
    assert first_error(replace(correct, reward=None)) is None  # unscored: not a failure


def test_it_treats_invalid_actions_other_calls_and_extra_changes_as_errors(tasks):
    task = tasks["update_task_1"]
    invalid = Message("assistant", tool_calls=(call("delete_task", task_id="task_1"),),
                      meta={"action_error": "unknown tool 'delete_task'"})
    assert first_error(episode(task, invalid)).reason == "invalid action: unknown tool 'delete_task'"
    other = first_error(episode(task, call("create_task", user_id="user_1", title="Done")))
    assert (other.step_index, other.reason) == (1, "create_task instead of update_task_status")
    # Repeating a gold action already done is fine; a change after the gold path is not.
    extra = call("update_task_status", task_id="task_1", status="pending")
    error = first_error(episode(task, call("update_task_status", **DONE), call("update_task_status", **DONE), extra))
    assert error == FirstError(3, rendered(extra), None, "update_task_status is not needed")


def test_it_localises_an_early_end_only_on_a_user_stop_or_a_transfer(tasks):
    task = tasks["update_task_1"]
    stopped = episode(task, call("get_task", task_id="task_1"), "Anything else?", ending="user_stop")
    assert first_error(stopped) == FirstError(2, "Anything else?", task.meta["evaluation_criteria"]["actions"][0],
                                              "ended without update_task_status")
    transfer = call("transfer_to_human_agents", summary="wants task_1 done")
    moved = first_error(episode(task, transfer, ending="agent_transfer"))
    assert (moved.step_index, moved.reason) == (1, "ended without update_task_status")
    cut = episode(task, call("get_task", task_id="task_1"), "Let me check.", ending="max_turns")
    assert first_error(cut) is None
    gave_up = first_error(episode(tasks["impossible_task_1"], "Sorry, I cannot delete tasks."))
    assert gave_up.reason == "ended without transfer_to_human_agents"
    hard = hard_tasks([stopped, cut])
    assert unlocalised([stopped, cut], hard) == [cut.content_hash()]
    # opt-in: the turn cap as an end; the last step had the turn the expected gold action needed
    assert first_error(cut, at_turn_cap=True) == FirstError(2, "Let me check.", task.meta["evaluation_criteria"][
        "actions"][0], "ran out of turns without update_task_status")
    assert unlocalised([stopped, cut], hard, at_turn_cap=True) == []
    assert [x.step_index for x in runtime_labels([cut], hard, at_turn_cap=True) if x.decision == "intervene"] == [2]
    assert first_error(episode(task, call("update_task_status", task_id="task_1", status="completed"),
                               ending="max_turns", reward=1.0), at_turn_cap=True) is None  # a success: no error


def test_it_skips_gold_reads_and_the_users_gold_actions(tasks):
    task = tasks["update_task_1"]
    criteria = dict(task.meta["evaluation_criteria"])
    criteria["actions"] = [{"name": "get_task", "arguments": {"task_id": "task_1"}},
                           {"name": "dismiss_notification", "arguments": {"notification_id": "n"}, "requestor": "user"},
                           *criteria["actions"]]
    task = replace(task, meta={**task.meta, "evaluation_criteria": criteria})
    assert first_error(episode(task, call("update_task_status", **DONE), "Done.")) is None


def test_it_reads_the_numbering_of_a_real_episode():
    script = iter(["Please mark task_1 as completed.", "Thanks ###STOP###"])
    env = make_env("tool_use", oracle=FakeBackend(model="scripted-user", responder=lambda request: next(script)))
    env.reset(next(t for t in env.tasks("graded") if t.external_id == "update_task_1"))
    env.step(rendered(call("update_task_status", task_id="task_1", status="pending")))
    env.step("It is done.")
    run = env.trajectory()
    assert run.termination_reason == "user_stop" and run.reward == 0.0
    error = first_error(run)
    assert (error.step_index, error.reason) == (1, "wrong status for update_task_status")


def test_it_labels_the_steps_before_the_first_error_and_the_successes(tasks):
    update, solved = tasks["update_task_1"], tasks["impossible_task_1"]
    wrong = call("update_task_status", task_id="task_1", status="pending")
    failed = episode(update, call("get_task", task_id="task_1"), "Marking it now.", wrong, "Done.")
    invalid = Message("assistant", "TOOL_CALL: {", meta={"action_error": "not valid JSON"})
    success = episode(update, invalid, call("update_task_status", **DONE), "Done.", reward=1.0)
    easy = episode(solved, call("transfer_to_human_agents", summary="delete"), reward=1.0)
    runs = [failed, success, easy]
    labels = runtime_labels(runs, hard_tasks(runs), approve_ratio=10)
    assert [(label.trajectory, label.step_index, label.decision) for label in labels] == [
        (failed.content_hash(), 1, "approve"), (failed.content_hash(), 2, "approve"),
        (failed.content_hash(), 3, "intervene"), (success.content_hash(), 2, "approve"),
        (success.content_hash(), 3, "approve")]  # no greeting, no invalid action, nothing of a solved task
    expected = 'update_task_status(task_id="task_1", status="completed")'
    assert labels[2] == RuntimeLabel(failed.content_hash(), 3, "intervene",
                                     FIRST_ERROR_FEEDBACK.format(reason="wrong status for update_task_status",
                                                                 expected=expected),
                                     rendered(wrong), "wrong status for update_task_status", "update_task_1")
    assert labels[2].feedback == ("This action does not do what the task needs next (wrong status for "
                                  f"update_task_status): expected {expected}.")
    assert labels[1].action_text == "Marking it now." and labels[0].action_text == rendered(
        call("get_task", task_id="task_1"))


def balanced_case(tasks) -> list[TrajectoryRecord]:
    """Two localised errors (2 and 1 approvals before them), one unlocalised failure, a success (3 approvals)."""
    task = tasks["update_task_1"]
    wrong = call("update_task_status", task_id="task_1", status="pending")
    return [episode(task, call("get_users"), call("get_task", task_id="task_1"), wrong),
            episode(task, "Which task?", wrong, trial=1),
            episode(task, "Let me look.", ending="max_turns", trial=2),
            episode(task, call("get_task", task_id="task_1"), call("update_task_status", **DONE), "Done.",
                    reward=1.0, trial=3)]


def test_it_balances_approvals_to_the_ratio_exactly(tasks):
    runs = balanced_case(tasks)
    hard = hard_tasks(runs)
    every = runtime_labels(runs, hard, approve_ratio=100)
    assert [label.decision for label in every].count("approve") == 6
    order = {(label.trajectory, label.step_index): i for i, label in enumerate(every)}
    for ratio, approvals in [(0.0, 0), (0.5, 1), (1.0, 2), (2.0, 4), (3.0, 6), (100, 6)]:
        labels = runtime_labels(runs, hard, approve_ratio=ratio)
        decisions = [label.decision for label in labels]
        assert decisions.count("intervene") == 2 and decisions.count("approve") == approvals
        positions = [order[(label.trajectory, label.step_index)] for label in labels]
        assert positions == sorted(positions)  # trajectory order, then step order
    assert unlocalised(runs, hard) == [runs[2].content_hash()]
    with pytest.raises(ValueError):
        runtime_labels(runs, hard, approve_ratio=-1)


def test_it_samples_the_approvals_deterministically_by_seed(tasks):
    runs = balanced_case(tasks)
    hard = hard_tasks(runs)
    assert runtime_labels(runs, hard, seed=7) == runtime_labels(runs, hard, seed=7)
    picks = {tuple(runtime_labels(runs, hard, approve_ratio=1.0, seed=seed)) for seed in range(10)}
    assert len(picks) > 1  # the seed chooses which approvals stay
    assert runtime_labels(runs, [replace(d, hard=False, label="solved") for d in hard]) == []
