"""The replay buffer: each iteration backs up transitions drawn from its fresh rollout and from everything
stored before (offline data, earlier rollouts), seeded, with exact counts."""

from __future__ import annotations

import json

import pytest

from nlac_core.records import Message, TaskRecord, TrajectoryRecord
from nlac_core.replay import ReplayConfig, compatible, draw, read_buffer
from nlac_core.rollout import write_trajectories


def game(word: str, questions: int, env: str | None = "twenty_questions") -> TrajectoryRecord:
    messages = [Message("user", "Ask your first question.")]
    for q in range(questions):
        messages += [Message("assistant", f"Is it thing {q} of {word}?"), Message("user", "No.")]
    return TrajectoryRecord(task=TaskRecord(external_id=word, instruction="Guess."), messages=tuple(messages),
                            reward=-float(questions), meta={"env": env} if env else {})


FRESH = [game("cat", 2), game("dog", 2)]  # 4 fresh steps
BUFFER = [game(f"old-{i}", 3) for i in range(6)]  # 18 stored steps


def words(steps):
    return [s.trajectory.task.external_id for s in steps]


def test_it_draws_half_fresh_half_replayed_transitions():
    d = draw(FRESH, BUFFER, "twenty_questions", ReplayConfig(size=8, fresh_fraction=0.5, seed=0))
    assert len(d.fresh) == 4 and len(d.replayed) == 4
    assert set(words(d.fresh)) == {"cat", "dog"} and all(w.startswith("old-") for w in words(d.replayed))


def test_it_fills_from_the_buffer_when_the_rollout_runs_short_and_the_other_way_round():
    d = draw(FRESH, BUFFER, "twenty_questions", ReplayConfig(size=12, fresh_fraction=0.5))
    assert (len(d.fresh), len(d.replayed)) == (4, 8)
    d = draw(FRESH, BUFFER[:1], "twenty_questions", ReplayConfig(size=8, fresh_fraction=0.25))
    assert (len(d.fresh), len(d.replayed)) == (4, 3)  # 2 fresh wanted, but the buffer holds only 3 steps
    d = draw(FRESH, [], "twenty_questions", ReplayConfig())
    assert (len(d.fresh), len(d.replayed)) == (4, 0)
    d = draw(FRESH, BUFFER, "twenty_questions", ReplayConfig(size=0))
    assert (len(d.fresh), len(d.replayed)) == (4, 0)  # size 0: the fresh rollout alone, as before the buffer


def test_it_draws_the_same_transitions_for_the_same_seed_and_others_for_another():
    def drawn(seed):
        d = draw(FRESH, BUFFER, "twenty_questions", ReplayConfig(size=6, fresh_fraction=0.5, seed=seed))
        return [(s.trajectory.task.external_id, s.index) for s in d.steps]

    assert drawn(1) == drawn(1) and drawn(1) != drawn(2)


def test_it_draws_only_trajectories_of_the_iterations_environment_and_never_a_fresh_one_twice():
    imported = game("airline", 3, env=None)  # an imported run carries no env: tool use only
    maths = game("x+1", 1, env="math")
    assert compatible(imported, "tool_use") and not compatible(imported, "twenty_questions")
    d = draw(FRESH, [*BUFFER, imported, maths, FRESH[0]], "twenty_questions", ReplayConfig(size=100))
    assert "airline" not in words(d.replayed) and "x+1" not in words(d.replayed) and "cat" not in words(d.replayed)
    assert len(d.replayed) == 18


def test_it_reads_a_buffer_from_files_and_folders(tmp_path):
    write_trajectories(tmp_path / "it1.jsonl", BUFFER[:2])
    (tmp_path / "runs").mkdir()
    write_trajectories(tmp_path / "runs" / "it2.jsonl", BUFFER[2:])
    assert read_buffer([tmp_path / "it1.jsonl", tmp_path / "runs"]) == BUFFER


def test_it_refuses_bad_settings():
    with pytest.raises(ValueError, match="replay size must be an integer of 0 or more, got -1"):
        ReplayConfig(size=-1)
    with pytest.raises(ValueError, match=r"fresh_fraction must be in \[0, 1\], got 1.5"):
        ReplayConfig(fresh_fraction=1.5)


@pytest.mark.slow
@pytest.mark.heavy
def test_it_runs_an_iteration_on_transitions_that_are_not_from_its_own_rollout(tmp_path, embedded_model_dir,
                                                                               embedded_backend):
    from nlac_core.bellman import BackupConfig
    from nlac_core.critic import CritiqueConfig
    from nlac_core.iteration import IterationConfig, run_iteration
    from nlac_core.refine import RefineConfig

    buffer = [game("Basketball", 2), game("Cat", 2)]
    config = IterationConfig(
        env="twenty_questions", tasks=1, trials=1, max_turns=1, policy_tokens=16, seed=3, tau=0.5,
        replay=ReplayConfig(size=4, fresh_fraction=0.25, seed=0),
        critique=CritiqueConfig(future_tokens=16, text_tokens=12),
        backup=BackupConfig(action_tokens=16, future_tokens=16, target_tokens=16, max_state_chars=600),
        refine=RefineConfig(max_new_tokens=16, on_optimal="refine"),
        sft={"max_steps": 1, "per_device_batch_size": 2, "max_length": 320, "learning_rate": 1e-5})
    result = run_iteration(tmp_path / "it", embedded_model_dir, embedded_model_dir, config,
                           lambda path: embedded_backend, oracle=embedded_backend, replay=buffer)
    assert (result.fresh_transitions, result.replayed_transitions) == (1, 3)
    drawn = json.loads((tmp_path / "it" / "transitions.json").read_text())
    buffer_hashes = {t.content_hash() for t in buffer}
    assert len(drawn["replayed"]) == 3 and all(h in buffer_hashes for h, _ in drawn["replayed"])
    targets = [json.loads(line) for line in (tmp_path / "it" / "backup.jsonl").read_text().splitlines()]
    assert sum(t["step"]["trajectory_hash"] in buffer_hashes for t in targets) == 3
    trained_on = [json.loads(line)["provenance"]["step"]["trajectory_hash"]
                  for line in (tmp_path / "it" / "dataset.jsonl").read_text().splitlines()]
    assert any(h in buffer_hashes for h in trained_on)  # the new checkpoint learned from replayed transitions
    assert result.train_metrics["steps"] == 1
