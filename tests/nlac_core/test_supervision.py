"""The runtime critic between the actor and the environment (asymmetric actor-critic), on the tau2 mock domain.

A scripted actor proposes a task nobody asked for, then fixes it; a scripted critic stops ``create_task``
calls. Exact counts: revision rounds and interventions are capped, the feedback reaches the actor only, and
only executed actions change the domain's database (and so the reward).
"""

from __future__ import annotations

import json

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.envs import make_env
from nlac_core.rollout import rollout
from nlac_core.supervision import SupervisionConfig, Supervisor, is_state_changing
from tests.conftest import needs_shared
from tests.nlac_core.scripted_critic import revisions, scripted_critic

pytestmark = needs_shared

FEEDBACK = "do not create tasks nobody asked for; update task_1 instead"
CREATE = 'TOOL_CALL: {"name": "create_task", "arguments": {"user_id": "user_1", "title": "Mark task_1 done"}}'
UPDATE = 'TOOL_CALL: {"name": "update_task_status", "arguments": {"task_id": "task_1", "status": "completed"}}'


def actor_reply(request) -> str:
    rounds = revisions(request)
    if rounds == 0:  # a fresh step: the task is done once the update's result is in the conversation
        done = any('"status": "completed"' in str(m["content"]) for m in request.messages)
        return "Done: task_1 is completed." if done else CREATE
    return CREATE if rounds == 1 else UPDATE


def critic() -> FakeBackend:
    return scripted_critic(lambda proposal: "create_task" in proposal, FEEDBACK)


def play(config: SupervisionConfig):
    replies = iter(["Please mark task_1 as completed.", "Thanks. ###STOP###", "Bye. ###STOP###"])
    user = FakeBackend(model="scripted-user", responder=lambda r: next(replies))
    env = make_env("tool_use", oracle=user)
    task = next(t for t in env.tasks("all") if t.external_id == "update_task_1")
    actor = FakeBackend(model="scripted-actor", responder=actor_reply)
    supervisor = Supervisor(actor, critic(), config)
    (record,) = rollout(env, actor, [task], supervisor=supervisor, max_turns=6)
    return record, user


def steps(record):
    return [m for m in record.messages if m.role == "assistant" and m.meta.get("supervision")]


def test_it_lets_the_actor_revise_up_to_the_round_limit_and_runs_only_the_executed_action():
    record, user = play(SupervisionConfig(max_rounds=2, max_interventions=4))
    first, second = steps(record)[:2]
    checks = first.meta["supervision"]
    assert [(c["round"], c["decision"]) for c in checks] == [(0, "intervene"), (1, "intervene"), (2, "unchecked")]
    assert checks[0]["feedback"] == FEEDBACK and checks[2]["reason"] == "the step's revision rounds are used up"
    assert [c.get("executed", False) for c in checks] == [False, False, True]
    assert first.tool_calls[0].name == "update_task_status"  # the revision ran, not the proposals
    assert [c["decision"] for c in second.meta["supervision"]] == ["approve"]
    assert record.meta["supervision"]["interventions"] == 2 and record.meta["supervision"]["checks"] == 3
    called = [tc.name for m in record.messages for tc in m.tool_calls]
    assert "create_task" not in called
    assert record.reward == 1.0 and record.reward_info["db"]["match"] is True  # rejected calls changed nothing
    # the feedback reached the actor only: not the episode, not the simulated user
    assert all(FEEDBACK not in (m.content or "") for m in record.messages)
    assert all(FEEDBACK not in json.dumps(request.messages) for _, batch in user.calls for request in batch)


def test_it_stops_intervening_once_the_episode_budget_is_spent():
    record, _ = play(SupervisionConfig(max_rounds=2, max_interventions=1))
    checks = steps(record)[0].meta["supervision"]
    assert [c["decision"] for c in checks] == ["intervene", "unchecked"]
    assert checks[-1]["reason"] == "the episode's interventions are used up"
    assert record.meta["supervision"]["interventions"] == 1
    assert "create_task" in [tc.name for m in record.messages for tc in m.tool_calls]  # the last proposal ran
    assert record.reward == 0.0


def test_it_checks_only_state_changing_calls_when_asked():
    record, _ = play(SupervisionConfig(max_rounds=2, where="state_changing"))
    replies = [m for m in steps(record) if not m.tool_calls]
    assert replies and all(c["decision"] == "unchecked" and c["reason"] == "not a state-changing tool call"
                           for m in replies for c in m.meta["supervision"])
    assert is_state_changing(CREATE) and not is_state_changing('TOOL_CALL: {"name": "get_users", "arguments": {}}')
    assert not is_state_changing("Sure, I can help.")


class SeededActor(FakeBackend):
    """The scripted actor, taking one seed per request as the hf backend does; keeps (request, seed) pairs."""

    def __init__(self) -> None:
        super().__init__(model="seeded-actor", responder=actor_reply)
        self.seen: list[tuple[bool, int | None]] = []

    def generate(self, requests, spec, *, row_seeds=None):
        for request, seed in zip(requests, row_seeds or [None] * len(requests), strict=True):
            self.seen.append((revisions(request) > 0, seed))
        return super().generate(requests, spec)


def test_it_samples_each_revision_with_a_seed_of_its_own_episode():
    from nlac_core.backends.base import SamplingSpec
    from nlac_core.rollout import derive_seed

    seeds = {}
    for trials in (1, 3):  # alone, then beside batch mates: trial 0's revisions get the same seeds
        user = FakeBackend(model="scripted-user", responder=lambda r: "Please mark task_1 as completed.")
        env = make_env("tool_use", oracle=user)
        task = next(t for t in env.tasks("all") if t.external_id == "update_task_1")
        actor = SeededActor()
        supervisor = Supervisor(actor, critic(), SupervisionConfig(max_rounds=2, max_interventions=2))
        records = rollout(env, actor, [task], trials=trials, spec=SamplingSpec(seed=7, temperature=0.7),
                          supervisor=supervisor, max_turns=2)
        assert all(r.meta["supervision"]["interventions"] == 2 for r in records)
        seeds[trials] = [s for revision, s in actor.seen if revision]
    first = derive_seed(derive_seed(7, "update_task_1", 0), "turn", 0)  # trial 0's first proposal
    assert seeds[1] == [derive_seed(first, "revision", 0), derive_seed(first, "revision", 1)]
    assert set(seeds[1]) <= set(seeds[3]) and len(set(seeds[3])) == len(seeds[3]) == 6  # none shared


def test_it_refuses_a_bad_configuration():
    with pytest.raises(ValueError, match="where"):
        SupervisionConfig(where="sometimes")
    with pytest.raises(ValueError, match="max_rounds"):
        SupervisionConfig(max_rounds=-1)


@pytest.mark.slow
def test_it_supervises_the_embedded_model_with_itself_within_the_limits(embedded_backend):
    """Actor and critic are both SmolLM2: whatever it writes, the protocol's promises hold."""
    replies = iter(["Please mark task_1 as completed."] + ["Is it done? ###STOP###"] * 5)
    user = FakeBackend(model="scripted-user", responder=lambda r: next(replies))
    env = make_env("tool_use", oracle=user)
    task = next(t for t in env.tasks("all") if t.external_id == "update_task_1")
    supervisor = Supervisor(embedded_backend, embedded_backend, SupervisionConfig(max_rounds=1, max_interventions=2,
                                                                                  feedback_tokens=32))
    (record,) = rollout(env, embedded_backend, [task], supervisor=supervisor, max_turns=3)
    checked = [m for m in record.messages if m.role == "assistant" and m.meta.get("supervision")]
    assert checked and len(checked) <= 3
    interventions = [c for m in checked for c in m.meta["supervision"] if c["decision"] == "intervene"]
    assert len(interventions) == record.meta["supervision"]["interventions"] <= 2
    for m in checked:
        rounds = m.meta["supervision"]
        assert len([c for c in rounds if c["decision"] in ("approve", "intervene")]) <= 1  # R = 1: one check
        assert sum(c.get("executed", False) for c in rounds) == 1 and rounds[-1]["executed"]
        assert all(c["decision"] in ("approve", "intervene", "unchecked") for c in rounds)
    for c in interventions:
        assert c["feedback"] and c["critic_model"] == embedded_backend.model
        assert all(c["feedback"] not in (m.content or "") for m in record.messages)
        assert all(c["feedback"] not in json.dumps(r.messages) for _, batch in user.calls for r in batch)
    # only executed actions changed the database: replaying the stored (executed) calls on a fresh database
    # gives the database the episode ended with, whatever the rejected proposals were
    replay = make_env("tool_use", oracle=user)
    replay.restore(task, list(record.messages))
    assert replay.domain.db_hash()[:16] == record.reward_info["db"]["episode_hash"]
