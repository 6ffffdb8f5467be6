"""The tau2 mock domain: tools that enforce the policy, initial states, and reward by gold replay.

The simulated user is scripted (a FakeBackend answering in turn): what is
tested is the environment's bookkeeping, not the user model.
"""

import json

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.envs import EnvError, make_env
from nlac_core.envs.mock_domain import MockDomain
from nlac_core.envs.tool_use import GREETING
from tests.conftest import SHARED, needs_shared

pytestmark = needs_shared

MOCK = SHARED / "tau2-bench" / "domains" / "mock"


def call(name, **arguments):
    return "TOOL_CALL: " + json.dumps({"name": name, "arguments": arguments})


def scripted_user(*replies):
    script = iter(replies)
    return FakeBackend(model="scripted-user", responder=lambda request: next(script))


def episode(task_id, *user_replies, split="all"):
    env = make_env("tool_use", oracle=scripted_user(*user_replies))
    task = next(t for t in env.tasks(split) if t.external_id == task_id)
    observation = env.reset(task)
    return env, observation


def test_it_enforces_the_policy_in_the_tools():
    domain = MockDomain.load(MOCK)
    before = domain.db_hash()
    assert domain.call("create_task", {"user_id": "user_1", "title": ""}) == "Error: each task must have a title"
    assert domain.call("create_task", {"user_id": "user_1"}) == "Error: create_task: missing argument(s) title"
    assert domain.call("create_task", {"user_id": "user_9", "title": "X"}).startswith("Error: user 'user_9' not found")
    assert domain.call("update_task_status", {"task_id": "task_1", "status": "in_progress"}) == (
        "Error: status must be \"pending\" or \"completed\", got 'in_progress'")
    assert domain.call("update_task_status", {"task_id": "task_7", "status": "completed"}) == (
        "Error: task 'task_7' not found")
    assert domain.call("delete_task", {"task_id": "task_1"}).startswith("Error: unknown tool 'delete_task'")
    assert domain.call("dismiss_notification", {"notification_id": "notif_1"}).startswith("Error: unknown tool")
    assert domain.db_hash() == before  # refused calls changed nothing
    created = json.loads(domain.call("create_task", {"user_id": "user_1", "title": "Plan", "description": "Q1"}))
    assert created == {"task_id": "task_2", "title": "Plan", "description": "Q1", "status": "pending"}
    assert json.loads(domain.call("get_users", {}))[0]["tasks"] == ["task_1", "task_2"]
    assert json.loads(domain.call("update_task_status", {"task_id": "task_2", "status": "completed"}))["status"] == (
        "completed")


def test_it_gives_reward_1_for_the_gold_actions_and_0_for_a_wrong_sequence():
    env, first = episode("update_task_1", "Please mark task_1 as completed.", "Thanks. ###STOP###")
    assert first == "Please mark task_1 as completed." and env.messages[0].content == GREETING
    assert json.loads(env.step(call("update_task_status", task_id="task_1", status="completed")).observation)[
        "status"] == "completed"
    result = env.step("Done: task_1 is completed.")
    assert result.done and result.reward == 1.0
    record = env.trajectory()
    assert record.reward == 1.0 and record.termination_reason == "user_stop"
    assert record.reward_info["db"]["match"] is True and record.reward_info["not_checked"] == ["COMMUNICATE"]
    assert record.policy.startswith("# Mock Domain Policy") and record.user_model == "scripted-user"

    env, _ = episode("update_task_1", "Please mark task_1 as completed.", "Thanks. ###STOP###")
    env.step(call("create_task", user_id="user_1", title="Mark task_1 done"))  # a task nobody asked for
    env.step(call("update_task_status", task_id="task_1", status="completed"))
    result = env.step("All done.")
    assert result.done and result.reward == 0.0 and env.trajectory().reward_info["db"]["match"] is False


def test_it_plays_the_user_tools_task_with_the_users_own_tools():
    env, first = episode("update_task_with_user_tools",
                         call("check_notifications"),
                         "I finished task_1, please mark it as completed.",
                         call("dismiss_notification", notification_id="notif_1"),
                         "Thanks! ###STOP###")
    assert first == "I finished task_1, please mark it as completed."
    assert env.domain.user_db["notifications"]["notif_1"]["status"] == "unread"  # added by initialization_actions
    user_tool = [m for m in env.messages if m.requestor == "user"]
    assert json.loads(user_tool[0].content)[0]["notification_id"] == "notif_1"
    env.step(call("update_task_status", task_id="task_1", status="completed"))
    result = env.step("I've marked task_1 as completed.")
    assert result.done and result.reward == 1.0
    info = env.trajectory().reward_info
    assert info["components"] == {"DB": 1.0, "ACTION": 1.0, "ENV_ASSERTION": 1.0}
    assert info["env_assertions"][0]["met"] is True
    prompt = env.policy_request().messages[-1]["content"]
    assert "check_notifications" not in prompt.split("CONVERSATION SO FAR:")[1]  # hidden from the agent

    env, _ = episode("update_task_with_user_tools", "Please mark task_1 as completed.", "Bye ###STOP###")
    env.step(call("update_task_status", task_id="task_1", status="completed"))
    result = env.step("Done.")
    assert result.reward == 0.0 and env.trajectory().reward_info["components"]["ENV_ASSERTION"] == 0.0


@pytest.mark.parametrize("task_id", ["update_task_with_initialization_data", "update_task_with_initialization_actions",
                                     "update_task_with_message_history"])
def test_it_applies_the_initial_state_before_the_episode(task_id):
    env, _ = episode(task_id, "Please mark task_2 as completed.", "Great. ###STOP###")
    assert env.domain.db["tasks"]["task_2"]["status"] == "pending"
    assert "task_2" in env.domain.db["users"]["user_1"]["tasks"]
    env.step(call("update_task_status", task_id="task_2", status="completed"))
    assert env.step("task_2 is completed now.").reward == 1.0


def test_it_starts_from_the_message_history_and_checks_env_assertions():
    env, first = episode("update_task_with_history_and_env_assertions", "Now mark it completed please.",
                         "Thanks ###STOP###")
    assert [m.role for m in env.messages[:5]] == ["user", "assistant", "tool", "assistant", "user"]
    assert env.messages[1].tool_calls[0].name == "create_task" and GREETING not in [m.content for m in env.messages]
    env.step(call("update_task_status", task_id="task_2", status="completed"))
    env.step("Done.")
    info = env.trajectory().reward_info
    assert env.trajectory().reward == 1.0 and info["reward_basis"] == ["ENV_ASSERTION"] and "DB" not in info[
        "components"]


def test_it_rewards_transferring_the_impossible_request():
    env, _ = episode("impossible_task_1", "Delete all my tasks.")
    result = env.step(call("delete_task", task_id="task_1"))
    assert not result.done and result.observation.startswith("Error: unknown tool 'delete_task'")
    assert env.messages[-2].meta["action_error"].startswith("unknown tool")
    result = env.step(call("transfer_to_human_agents", summary="wants all tasks deleted"))
    assert result.done and result.reward == 1.0 and env.termination_reason == "agent_transfer"


def test_it_records_an_unparseable_action_and_goes_on():
    env, _ = episode("update_task_1", "Please complete task_1.", "Hm?", "###STOP###")
    result = env.step('TOOL_CALL: {"name": "update_task_status", "arguments": ')
    assert not result.done and result.observation.startswith("Error: the tool call is not valid JSON")
    assert env.messages[-2].content.startswith("TOOL_CALL:") and env.messages[-2].tool_calls == ()
    assert env.step("Sorry, which task?").observation == "Hm?"


def test_it_ends_a_conversation_at_the_turn_cap_with_reward_0():
    env = make_env("tool_use", oracle=scripted_user("Complete task_1.", *["What?"] * 5), max_turns=3)
    env.reset(next(t for t in env.tasks() if t.external_id == "update_task_1"))
    env.step(call("update_task_status", task_id="task_1", status="completed"))
    env.step("Working on it.")
    result = env.step("Still working.")
    assert result.done and env.termination_reason == "max_turns" and env.trajectory().reward == 0.0
    assert env.trajectory().reward_info["would_have_scored"] == 1.0


def test_it_leaves_the_ungraded_task_out_of_the_default_split():
    env = make_env("tool_use", oracle=FakeBackend())
    assert "create_task_1_nl_eval" not in [t.external_id for t in env.tasks()]
    assert len(env.tasks()) == 9 and len(env.tasks("base")) == 10 and env.tasks()[0].split == "base"
    nl_env, _ = episode("create_task_1_nl_eval", "Create 'Important Meeting' for user_1.", "###STOP###", split="base")
    nl_env.step("Sure, done.")
    assert nl_env.trajectory().reward_info["graded"] is False
    with pytest.raises(EnvError, match="unknown split 'train'"):
        env.tasks("train")


def test_it_shows_the_simulated_user_the_conversation_with_roles_flipped():
    env, _ = episode("update_task_1", "Please complete task_1.", "Thanks ###STOP###")
    env.step(call("update_task_status", task_id="task_1", status="completed"))  # hidden from the user
    env.step("Done: task_1 is completed.")
    (_, (request,)) = env._shared.user.calls[-1]
    assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "user"]
    assert "YOUR INSTRUCTIONS: You have completed the task" in request.messages[0]["content"]
    assert [m["content"] for m in request.messages[1:]] == [GREETING, "Please complete task_1.",
                                                            "Done: task_1 is completed."]
