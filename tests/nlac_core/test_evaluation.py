"""Metrics from trajectories with known outcomes, and evaluate = rollout + metrics."""

import json

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.envs import make_env
from nlac_core.evaluation import compute_metrics, evaluate, is_success
from nlac_core.records import Message, TaskRecord, TrajectoryRecord
from tests.conftest import needs_shared


def episode(task_id, reward, success=None, turns=1, reason="done", invalid=0):
    steps = [Message("assistant", f"step {i}", meta={"action_error": "bad"} if i < invalid else {})
             for i in range(turns)]
    info = None if reward is None else ({} if success is None else {"success": success})
    return TrajectoryRecord(task=TaskRecord(task_id), messages=tuple(steps), reward=reward, reward_info=info,
                            termination_reason=reason, meta={"env": "twenty_questions", "turns": turns})


def test_it_computes_winrate_reward_pass_hat_k_and_turns_from_known_outcomes():
    records = [
        episode("Cat", -3.0, True, turns=4, reason="guessed"), episode("Cat", -2.0, True, turns=3, reason="guessed"),
        episode("Dog", -20.0, False, turns=20, reason="max_questions", invalid=2),
        episode("Dog", -7.0, True, turns=8, reason="guessed"),
        episode("Car", -20.0, False, turns=20, reason="max_questions"),
        episode("Car", None, turns=5, reason="error"),  # no reward: counted, left out of the means
    ]
    result = compute_metrics(records)
    assert (result.env, result.n_tasks, result.n_episodes, result.n_scored) == ("twenty_questions", 3, 6, 5)
    assert result.success_rate == pytest.approx(3 / 5)
    assert result.mean_reward == pytest.approx((-3 - 2 - 20 - 7 - 20) / 5)
    assert result.pass_hat_k == pytest.approx({1: (1 + 0.5 + 0) / 3, 2: (1 + 0) / 2})  # Car has 1 scored trial
    assert result.mean_turns == pytest.approx((4 + 3 + 20 + 8 + 20) / 5)
    assert result.invalid_action_rate == pytest.approx(2 / 55)
    assert result.termination_reasons == {"guessed": 3, "max_questions": 2, "error": 1}
    data = json.loads(json.dumps(result.to_dict()))
    assert data["pass_hat_k"]["1"] == pytest.approx(0.5) and "trajectories" not in data
    assert "winrate: 0.600" in result.summary() and "pass^k: k=1 0.500  k=2 0.500" in result.summary()


def test_it_falls_back_to_reward_1_as_success_for_imported_trajectories():
    assert is_success(episode("t", 1.0)) and not is_success(episode("t", 0.0))
    assert not is_success(episode("t", 1.0, success=False))  # the environment's word wins
    empty = compute_metrics([])
    assert empty.success_rate is None and empty.pass_hat_k == {} and "n/a" in empty.summary()


@needs_shared
def test_it_evaluates_a_policy_by_rolling_it_out():
    env = make_env("math")
    tasks = env.tasks(limit=4)
    right = {t.instruction: t.gold_answer for t in tasks[:2]}  # knows the first two answers, not the others

    def solver(request):
        asked = request.messages[-1]["content"]
        known = [answer for problem, answer in right.items() if asked.startswith(problem)]
        return f"The answer is \\boxed{{{known[0]}}}." if known else "I am not sure."

    result = evaluate(env, FakeBackend(responder=solver), limit=4, trials=2)
    assert (result.n_tasks, result.n_episodes, result.success_rate, result.mean_reward) == (4, 8, 0.5, 0.5)
    assert result.pass_hat_k == {1: 0.5, 2: 0.5} and result.mean_turns == 1.0
    assert result.invalid_action_rate == 0.5 and result.termination_reasons == {"answered": 8}
    assert result.meta["complete"] is True and result.meta["policy_prompt_id"].startswith("policy_math@")
    assert len(result.trajectories) == 8 and result.seconds > 0
