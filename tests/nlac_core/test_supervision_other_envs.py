"""The runtime critic on the project's other environments: 20 Questions (a question per step) and MATH (one answer).

A scripted actor's first proposal is wrong, a scripted critic stops it, the revision is right: the revision
is what the environment sees (the oracle never hears a rejected question, the grader never grades a rejected
answer), and the feedback reaches no message of the episode.
"""

from __future__ import annotations

import json

from nlac_core.backends.fake import FakeBackend
from nlac_core.envs import make_env
from nlac_core.rollout import rollout
from nlac_core.supervision import SupervisionConfig, Supervisor
from tests.conftest import needs_shared
from tests.nlac_core.scripted_critic import revisions, scripted_critic

pytestmark = needs_shared


def test_it_supervises_twenty_questions_and_the_oracle_never_hears_a_rejected_question():
    feedback = "do not guess a vegetable before asking whether it is alive"
    oracle = FakeBackend(model="scripted-oracle", responder=lambda r: "No")
    env = make_env("twenty_questions", oracle=oracle)
    task = env.tasks("test", 1)[0]
    word = task.gold_answer
    assert "turnip" not in word

    def ask(request) -> str:  # turn 0: a guess, revised into a question; turn 1: the word
        if revisions(request):
            return "Is it alive?"
        asked = any("Is it alive?" in str(m["content"]) for m in request.messages)
        return f"Is it a {word}?" if asked else "Is it a turnip?"

    actor = FakeBackend(model="scripted-actor", responder=ask)
    supervisor = Supervisor(actor, scripted_critic(lambda proposal: "turnip" in proposal, feedback),
                            SupervisionConfig(max_rounds=1))
    (record,) = rollout(env, actor, [task], supervisor=supervisor, max_turns=3)
    first, second = [m for m in record.messages if m.role == "assistant"]
    assert [c["decision"] for c in first.meta["supervision"]] == ["intervene", "unchecked"]
    assert first.meta["supervision"][0]["proposal"].strip() == "Is it a turnip?"
    assert first.content == "Is it alive?" and [c["decision"] for c in second.meta["supervision"]] == ["approve"]
    assert second.content == f"Is it a {word}?" and record.reward_info.get("success") is True
    assert all("turnip" not in (m.content or "") and feedback not in (m.content or "") for m in record.messages)
    heard = [json.dumps(r.messages) for _, batch in oracle.calls for r in batch]
    assert heard and all("Is it alive?" in h and "turnip" not in h and feedback not in h for h in heard)
    summary = record.meta["supervision"]
    assert (summary["interventions"], summary["checks"]) == (1, 2)


def test_it_supervises_a_math_answer_and_only_the_revision_is_graded():
    feedback = "recheck the arithmetic: the answer is not 12345"
    env = make_env("math")
    task = env.tasks("test", 1)[0]
    actor = FakeBackend(model="scripted-actor", responder=lambda r: (
        f"The answer is $\\boxed{{{task.gold_answer}}}$." if revisions(r) else "The answer is $\\boxed{12345}$."))
    supervisor = Supervisor(actor, scripted_critic(lambda proposal: "12345" in proposal, feedback),
                            SupervisionConfig(max_rounds=2))
    (record,) = rollout(env, actor, [task], supervisor=supervisor)
    (answer,) = [m for m in record.messages if m.role == "assistant"]
    assert [c["decision"] for c in answer.meta["supervision"]] == ["intervene", "approve"]
    assert answer.meta["supervision"][-1]["executed"] is True
    assert record.reward == 1.0 and record.reward_info["predicted"] == task.gold_answer
    assert all(feedback not in (m.content or "") and "12345" not in (m.content or "") for m in record.messages)
