"""Held-out splits: an iteration trains on the environment's train split by default and refuses to train on the
split its checkpoints are scored on, naming both; evaluation scores on the held-out split."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nlac_core.envs import EVAL_SPLITS, TRAIN_SPLITS, overlapping
from nlac_core.iteration import IterationConfig
from tests.conftest import ROOT


@pytest.mark.parametrize("env", ["twenty_questions", "math", "tool_use"])
def test_it_trains_and_scores_on_disjoint_splits_by_default(env):
    config = IterationConfig(env=env)
    assert config.train_split() == TRAIN_SPLITS[env] and not overlapping(env, "", "")
    assert TRAIN_SPLITS[env] != EVAL_SPLITS[env]


@pytest.mark.parametrize("env, split, eval_split, message", [
    ("math", "test", "", "split 'test' shares tasks with eval_split 'test'"),
    ("math", "all", "test", "split 'all' shares tasks with eval_split 'test'"),
    ("twenty_questions", "", "train", "split 'train' shares tasks with eval_split 'train'"),
    ("tool_use", "synthetic", "synthetic_test", "split 'synthetic' shares tasks with eval_split 'synthetic_test'"),
])
def test_it_refuses_an_iteration_that_would_train_on_its_evaluation_split(env, split, eval_split, message):
    with pytest.raises(ValueError, match="the iteration would train on its evaluation split") as caught:
        IterationConfig(env=env, split=split, eval_split=eval_split)
    assert message in str(caught.value)


def test_it_refuses_it_on_the_command_line_before_loading_a_model(tmp_path):
    done = subprocess.run([sys.executable, "-m", "nlac_core", "iterate", "--env", "math", "--split", "test",
                           "--workdir", str(tmp_path / "it")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2
    assert "split 'test' shares tasks with eval_split 'test'" in done.stderr and "Traceback" not in done.stderr
