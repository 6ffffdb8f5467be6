"""Generated tasks of the tau2 mock domain: deterministic, split in halves, and each solved by its gold actions.

The policy and the simulated user are scripted (FakeBackends): what is tested is
that every generated task is well formed and graded as its gold says.
"""

import pytest

from nlac_core.actions import render_action
from nlac_core.backends.fake import FakeBackend
from nlac_core.envs import EnvError, make_env
from nlac_core.envs.mock_tasks import KINDS, synthetic_tasks
from nlac_core.records import ToolCall
from nlac_core.rollout import rollout
from tests.conftest import needs_shared

pytestmark = needs_shared


def user_backend():
    """Asks for help at the first turn, then ends the conversation at the agent's next reply."""
    return FakeBackend(model="scripted-user", responder=lambda request: (
        "Hi, I need help with my tasks." if len(request.messages) <= 2 else "Thanks! ###STOP###"))


@pytest.fixture(scope="module")
def env():
    return make_env("tool_use", oracle=user_backend())


def play(env, task, actions):
    """One episode where the agent emits ``actions`` (gold-like dicts) as tool calls, then replies."""
    script = iter([*(render_action(None, ToolCall("", a["name"], a["arguments"])) for a in actions),
                   "All done, anything else?"])
    (record,) = rollout(env, FakeBackend(model="scripted-policy", responder=lambda request: next(script)), [task])
    return record


def kind(task_id):
    return task_id.removeprefix("synthetic_").rsplit("_", 1)[0]


def wrong(actions):
    """The gold actions with one mistake: the first write gets the wrong status or title."""
    actions = [dict(a, arguments=dict(a["arguments"])) for a in actions]
    write = next(a for a in actions if a["name"] != "get_task")
    if write["name"] == "update_task_status":
        write["arguments"]["status"] = "pending" if write["arguments"]["status"] == "completed" else "completed"
    else:
        write["arguments"]["title"] += " (draft)"
    return actions


def test_it_generates_the_same_tasks_for_the_same_seed_and_others_for_another():
    assert synthetic_tasks(20, seed=3) == synthetic_tasks(20, seed=3)
    assert synthetic_tasks(20, seed=3) != synthetic_tasks(20, seed=4)
    assert synthetic_tasks(10) == synthetic_tasks(60)[:10]
    ids = [t["id"] for t in synthetic_tasks(60)]
    assert len(set(ids)) == 60 and ids[7] == "synthetic_update_two_007"
    assert {kind(i) for i in ids} == set(KINDS)


def test_it_splits_the_generated_tasks_in_halves_beside_the_domains_own(env):
    train, test, every = env.tasks("synthetic_train"), env.tasks("synthetic_test"), env.tasks("synthetic")
    assert len(train) >= 20 and len(test) >= 20 and [t.external_id for t in every] == [
        t.external_id for t in train + test]
    assert not {t.external_id for t in train} & {t.external_id for t in test}
    assert {t.split for t in train} == {"synthetic_train"} and {t.split for t in every} == {"synthetic"}
    assert not {t.external_id for t in every} & {t.external_id for t in env.tasks("all")}
    assert {kind(t.external_id) for t in train} == {kind(t.external_id) for t in test} == set(KINDS)
    task = train[0]
    assert task.gold_actions and task.instruction == task.meta["user_scenario"]["instructions"]
    assert task.meta["initial_state"]["initialization_data"]["agent_data"]["users"]
    assert env.tasks("synthetic", limit=3) == every[:3]


def test_it_leaves_the_domains_own_splits_as_they_were(env):
    graded = env.tasks()
    assert len(graded) == 9 and "create_task_1_nl_eval" not in [t.external_id for t in graded]
    assert len(env.tasks("base")) == 10 and len(env.tasks("all")) == 10 and graded[0].split == "base"
    with pytest.raises(EnvError, match="unknown split 'train'.*synthetic, synthetic_test, synthetic_train"):
        env.tasks("train")


def test_it_gives_reward_1_for_the_gold_actions_of_every_generated_task(env):
    for task in env.tasks("synthetic"):
        record = play(env, task, task.gold_actions)
        assert record.reward == 1.0, (task.external_id, record.reward_info)
        assert record.termination_reason == "user_stop" and record.reward_info["db"]["match"] is True
        results = [m.content for m in record.messages if m.role == "tool"]
        assert len(results) == len(task.gold_actions) and not any(r.startswith("Error") for r in results)


def test_it_gives_reward_0_for_a_wrong_status_or_title(env):
    for task in env.tasks("synthetic"):
        record = play(env, task, wrong(task.gold_actions))
        assert record.reward == 0.0 and record.reward_info["db"]["match"] is False, task.external_id


def test_it_counts_the_read_when_the_user_asks_about_a_task_first(env):
    task = next(t for t in env.tasks("synthetic") if kind(t.external_id) == "ask_update")
    assert [a["name"] for a in task.gold_actions] == ["get_task", "update_task_status"]
    record = play(env, task, task.gold_actions[1:])  # the right write, but without reading the task first
    assert record.reward == 0.0 and record.reward_info["components"] == {"DB": 1.0, "ACTION": 0.0}
