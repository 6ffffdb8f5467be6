"""MATH500: one-step episodes scored by math-verify against the real gold answers."""

import threading

import pytest

from nlac_core.envs import EnvError, make_env
from nlac_core.envs.math import split_of
from nlac_core.envs.math_grading import grade
from tests.conftest import needs_shared

pytestmark = needs_shared


@pytest.fixture(scope="module")
def env():
    return make_env("math")


def problem(env, unique_id):
    return next(t for t in env.tasks("all") if t.external_id == unique_id)


def solve(env, unique_id, solution):
    slot = env.spawn()
    slot.reset(problem(env, unique_id))
    return slot, slot.step(solution)


@pytest.mark.parametrize("unique_id, answer", [
    ("test/algebra/2584.json", "14/3"),                           # gold \frac{14}{3}
    ("test/precalculus/807.json", "(3, \\pi/2)"),                 # gold \left( 3, \frac{\pi}{2} \right)
    ("test/intermediate_algebra/183.json", "(2, \\infty)"),       # gold (2,\infty)
    ("test/algebra/2043.json", "(-\\infty,2)\\cup(3,\\infty)"),   # gold (-\infty, 2) \cup (3, \infty)
    ("test/algebra/1349.json", "\\text{Evelyn}"),                 # a text answer
    ("test/prealgebra/1003.json", "\\frac{270}{7}"),              # gold \frac{270}7\text{ degrees}
])
def test_it_accepts_an_equivalent_answer_to_a_real_problem(env, unique_id, answer):
    slot, result = solve(env, unique_id, f"Working it out carefully, the answer is $\\boxed{{{answer}}}$.")
    assert result.reward == 1.0 and result.done and result.info["correct"] is True
    record = slot.trajectory()
    assert record.reward == 1.0 and record.reward_info["success"] is True and record.termination_reason == "answered"
    assert [m.role for m in record.messages] == ["user", "assistant"]
    assert record.messages[0].content == record.task.instruction


@pytest.mark.parametrize("unique_id, answer", [
    ("test/algebra/2584.json", "4.6667"),
    ("test/intermediate_algebra/183.json", "[2, \\infty)"),
    ("test/algebra/1349.json", "\\text{Bob}"),
])
def test_it_scores_a_wrong_answer_zero(env, unique_id, answer):
    _, result = solve(env, unique_id, f"So the answer is \\boxed{{{answer}}}.")
    assert result.reward == 0.0 and result.done and result.info["correct"] is False


def test_it_scores_a_solution_without_a_box_zero_and_says_why(env):
    slot, result = solve(env, "test/algebra/2584.json", "The answer is 14/3.")
    assert result.reward == 0.0 and result.info["predicted"] is None
    assert "\\boxed" in result.info["error"]
    assert slot.messages[-1].meta["action_error"] == result.info["error"]


def test_it_takes_the_last_boxed_answer(env):
    _, result = solve(env, "test/algebra/2584.json", "First guess \\boxed{5}, no wait: \\boxed{\\frac{28}{6}}")
    assert result.reward == 1.0 and result.info["predicted"] == "\\frac{28}{6}"


def test_it_grades_off_the_main_thread_where_signals_do_not_work():
    results = {}
    worker = threading.Thread(target=lambda: results.update(
        right=grade("\\frac{14}{3}", "14/3"), wrong=grade("\\frac{14}{3}", "5")))
    worker.start()
    worker.join(120)
    assert results["right"].correct is True and results["wrong"].correct is False


def test_it_lists_the_500_problems_in_a_train_and_a_test_half_and_rejects_other_splits(env, tmp_path):
    tasks = env.tasks("all")
    assert len(tasks) == 500 and tasks[0].external_id == "test/precalculus/807.json"
    assert tasks[0].meta == {"subject": "Precalculus", "level": 2} and tasks[0].gold_answer.startswith("\\left( 3")
    train, test = env.tasks("train"), env.tasks("test")
    assert (len(train), len(test)) == (274, 226)  # a seeded hash of each problem's id
    assert not {t.external_id for t in train} & {t.external_id for t in test}
    assert {t.split for t in train} == {"train"} and {t.split for t in test} == {"test"}
    assert env.tasks() == test and tasks[0].split == "train"  # evaluation's default is the held-out half
    assert split_of("test/precalculus/807.json") == "train"  # the id alone decides, whatever the file's order
    assert len(env.tasks(limit=50)) == 50
    with pytest.raises(EnvError, match="unknown split 'validation'"):
        env.tasks("validation")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "1+1?", "answer": "2"}\n{"problem": "no answer"}\n')
    with pytest.raises(EnvError, match="bad.jsonl, line 2: missing string field"):
        make_env("math", problems_path=bad)


@pytest.mark.parametrize("text, answer", [
    ("so \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"), ("\\boxed 5 and {x}", "5"), ("$\\boxed 12$", "12"),
    ("\\boxed{3} then \\boxed {4}", "4"), ("\\boxed{unclosed", None), ("\\boxedx", None),
])
def test_it_extracts_the_last_boxed_answer_in_either_latex_form(text, answer):
    from nlac_core.mathanswer import extract_boxed

    assert extract_boxed(text) == answer
