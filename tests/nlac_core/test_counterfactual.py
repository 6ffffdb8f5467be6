"""Counterfactual re-runs of supervised episodes on the tau2 mock domain, with a scripted actor and critic.

The critic stops ``create_task`` (nobody asked for a new task): without that intervention the episode fails,
so the intervention was helpful; forcing an intervention on the approved closing reply makes the actor create
the task after all, so that one would have been harmful.
"""

from __future__ import annotations

from nlac_core.backends.base import SamplingSpec
from nlac_core.backends.fake import FakeBackend
from nlac_core.counterfactual import cases_of, rerun
from nlac_core.envs import make_env
from nlac_core.intervention_metrics import helpfulness
from nlac_core.rollout import rollout
from nlac_core.supervision import SupervisionConfig, Supervisor
from tests.conftest import needs_shared
from tests.nlac_core.test_supervision import UPDATE, actor_reply, critic

pytestmark = needs_shared


def user_reply(request) -> str:
    """Asks once, then ends the conversation (stateless, so re-runs get the same user)."""
    spoken = sum(1 for m in request.messages if m["role"] == "assistant")  # roles flipped: the user's own turns
    return "Please mark task_1 as completed." if spoken == 0 else "Thanks. ###STOP###"


def setting():
    env = make_env("tool_use", oracle=FakeBackend(model="scripted-user", responder=user_reply))
    task = next(t for t in env.tasks("all") if t.external_id == "update_task_1")
    actor = FakeBackend(model="scripted-actor", responder=actor_reply)
    return env, task, actor, Supervisor(actor, critic(), SupervisionConfig(max_rounds=2, max_interventions=4))


def test_it_restores_the_database_and_turns_from_a_recorded_prefix():
    env, task, _, _ = setting()
    live = env.spawn()
    live.reset(task)
    live.step(UPDATE)
    restored = env.spawn()
    restored.restore(task, live.messages)
    assert restored.domain.db_hash() == live.domain.db_hash() != env.spawn().domain.db_hash()
    assert restored.turns == live.turns == 1 and restored.messages == live.messages and not restored.done


def test_it_re_runs_an_intervened_step_without_the_intervention_and_an_approved_one_with_a_forced_one():
    env, task, actor, supervisor = setting()
    (record,) = rollout(env, actor, [task], supervisor=supervisor, max_turns=6)
    assert record.success
    cases = cases_of([record], forced_sample=5, seed=0)
    assert [(c.step_index, c.kind) for c in cases] == [(1, "without"), (2, "forced")]  # step 0 is the greeting
    results = rerun(env, actor, cases, supervisor, spec=SamplingSpec(max_new_tokens=64), max_turns=6)
    by_kind = {case.kind: (case, episode) for case, episode in results}
    case, without = by_kind["without"]
    # the prefix is the recorded one; the original create_task ran at the step and stayed in the database
    assert without.messages[:case.message_index] == record.messages[:case.message_index]
    assert without.messages[case.message_index].tool_calls[0].name == "create_task"
    assert without.messages[case.message_index].meta["supervision"][0]["decision"] == "removed"
    assert not without.success
    assert without.meta["counterfactual"] == {"of": record.content_hash(), "step_index": 1, "kind": "without"}
    case, forced = by_kind["forced"]
    checks = forced.messages[case.message_index].meta["supervision"]
    assert [c["decision"] for c in checks] == ["intervene", "unchecked"] and checks[0]["forced"]
    assert not forced.success
    labels = [c.label(e) for c, e in results]
    assert helpfulness(labels) == {"n": 2, "would_fail": 1, "would_succeed": 1, "helpfulness": 1.0,
                                   "harmfulness": 1.0}


def test_it_repeats_a_re_run_and_picks_the_same_sample_for_the_same_seed():
    env, task, actor, supervisor = setting()
    (record,) = rollout(env, actor, [task], supervisor=supervisor, max_turns=6)
    assert cases_of([record], 1, seed=3) == cases_of([record], 1, seed=3)
    assert [c.kind for c in cases_of([record], 0)] == ["without"]
