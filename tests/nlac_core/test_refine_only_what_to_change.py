"""Refine only what the critique says to change: a step judged optimal keeps its action (no refine call), the
step that won its episode (a 20 Questions guess naming the word) is never rewritten, and distillation takes a
kept action as its own target or leaves it out, per a setting."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.critic import critique
from nlac_core.outputs import from_json, to_json
from nlac_core.records import Message, TaskRecord, TrajectoryRecord
from nlac_core.refine import RefineConfig, refine_steps, won_episode
from nlac_core.sft_data import StepIndex, distillation_records
from nlac_core.state import steps_of
from nlac_core.successor import transition_of

REWRITE = "Is it an animal?"


def game(won: bool) -> TrajectoryRecord:
    """A 20 Questions episode of three questions; the last names the word when ``won``."""
    task = TaskRecord(external_id="dog", instruction="Guess the word.", gold_outputs=("dog",))
    messages = [Message("user", "Ask your first question.")]
    for question, answer in (("Is it alive?", "Yes."), ("Is it a pet?", "Yes."),
                             ("Is it a dog?" if won else "Is it a cat?", "Yes." if won else "No.")):
        messages += [Message("assistant", question), Message("user", answer)]
    return TrajectoryRecord(task=task, messages=tuple(messages), reward=0.0 if won else -3.0,
                            reward_info={"success": won}, meta={"env": "twenty_questions"},
                            termination_reason="done" if won else "max_turns")


def critiques(steps, verdicts):
    made = critique(FakeBackend(responder=lambda r: " the game goes on."), [transition_of(s) for s in steps])
    return [replace(c, verdict=v) for c, v in zip(made, verdicts, strict=True)]


def refiner():
    return FakeBackend(model="refiner", responder=lambda r: REWRITE)


def refine_calls(backend) -> int:
    return sum(len(batch) for kind, batch in backend.calls if kind == "generate")


def test_it_keeps_a_step_judged_optimal_without_calling_the_model():
    steps = steps_of(game(won=False))
    backend = refiner()
    out = refine_steps(backend, steps, critiques(steps, ["optimal", "suboptimal", "harmful"]))
    assert refine_calls(backend) == 2  # only the steps the critique says to change
    assert [r.kept for r in out] == ["optimal", "", ""]
    assert out[0].refined_action == out[0].original_action == "Is it alive?" and out[0].valid and out[0].rounds == 0
    assert [r.refined_action for r in out[1:]] == [REWRITE, REWRITE]
    assert from_json(to_json(out[0])).kept == "optimal"


def test_it_refines_an_optimal_step_when_asked():
    steps = steps_of(game(won=False))
    backend = refiner()
    out = refine_steps(backend, steps, critiques(steps, ["optimal"] * 3), RefineConfig(on_optimal="refine"))
    assert refine_calls(backend) == 3 and [r.kept for r in out] == ["", "", ""]


def test_it_never_rewrites_the_guess_that_won_even_when_the_critique_calls_it_harmful():
    trajectory = game(won=True)
    steps = steps_of(trajectory)
    assert [won_episode(s) for s in steps] == [False, False, True]  # reward 0 is a win in 20 Questions
    backend = refiner()
    out = refine_steps(backend, steps, critiques(steps, ["suboptimal", "suboptimal", "harmful"]),
                       RefineConfig(on_optimal="refine"))
    assert out[2].kept == "won" and out[2].refined_action == "Is it a dog?"
    assert refine_calls(backend) == 2
    lost = steps_of(game(won=False))
    assert not any(won_episode(s) for s in lost)  # the last guess of a lost game is fair game


@pytest.mark.parametrize("kept_actions, expected", [(True, ["Is it alive?", REWRITE, "Is it a dog?"]),
                                                     (False, [REWRITE])])
def test_it_distills_a_kept_action_as_its_own_target_or_leaves_it_out(kept_actions, expected):
    trajectory = game(won=True)
    steps = steps_of(trajectory)
    out = refine_steps(refiner(), steps, critiques(steps, ["optimal", "suboptimal", "suboptimal"]))
    records = distillation_records(out, StepIndex([trajectory]), kept_actions=kept_actions)
    assert [r["completion"][0]["content"] for r in records] == expected
    assert [r["provenance"].get("kept", "") for r in records] == (["optimal", "", "won"] if kept_actions else [""])


def test_it_refuses_an_unknown_setting():
    with pytest.raises(ValueError, match="on_optimal must be one of keep, refine"):
        RefineConfig(on_optimal="skip")
