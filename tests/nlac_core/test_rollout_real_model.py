"""End to end with the embedded SmolLM2: the model plays, the environments judge.

What is asserted is the plumbing a real model exercises (chat templates,
stop strings, scoring, parsing of free text), not how well a 135M model
plays: before training it mostly loses, and that is the baseline we measure.
"""

import pytest

from nlac_core.backends.base import SamplingSpec
from nlac_core.envs import make_env
from nlac_core.formats import nlac_jsonl
from nlac_core.rollout import rollout
from tests.conftest import needs_shared

pytestmark = [needs_shared, pytest.mark.slow]


def test_it_plays_a_whole_game_of_twenty_questions(embedded_backend):
    env = make_env("twenty_questions", oracle=embedded_backend)
    record, = rollout(env, embedded_backend, [env.task_for("Cat")], spec=SamplingSpec(max_new_tokens=16))
    assert record.termination_reason in ("guessed", "max_questions")
    questions = [m for m in record.messages if m.role == "assistant"]
    answers = [m for m in record.messages if m.role == "user"][1:]
    assert 1 <= len(questions) == len(answers) == record.meta["turns"] <= 20
    assert record.reward == -float(len(questions) - (1 if record.reward_info["won"] else 0))
    for question, answer in zip(questions, answers, strict=True):
        if "action_error" in question.meta:
            assert answer.content.startswith("(Not a yes/no question")
        else:
            assert answer.content in ("Yes.", "No.") and answer.meta["oracle_mode"] == "loglikelihood"
        assert "\n" not in question.content and question.meta["finish_reason"] in ("stop", "length")
    assert record.source_model == embedded_backend.model == record.user_model
    assert nlac_jsonl.loads_all(nlac_jsonl.dumps(record)) == [record]


def test_it_solves_a_math_problem_end_to_end(embedded_backend):
    env = make_env("math")
    task = next(t for t in env.tasks("all") if t.external_id == "test/precalculus/807.json")
    record, = rollout(env, embedded_backend, [task], spec=SamplingSpec(max_new_tokens=96))
    solution = record.messages[-1]
    assert record.termination_reason == "answered" and record.reward in (0.0, 1.0)
    assert solution.role == "assistant" and solution.content and record.usage["policy_completion_tokens"] > 0
    assert record.reward_info["gold"] == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert (record.reward_info["predicted"] is None) == ("action_error" in solution.meta)
