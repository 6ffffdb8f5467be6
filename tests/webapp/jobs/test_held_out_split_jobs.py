"""Held-out splits in the jobs: an nlac-iteration rolls out on the environment's train split and is refused when
asked to train on its evaluation split (the field named, both splits in the message, no job left); an evaluate
job scores the held-out split by default."""

from __future__ import annotations

import pytest

from webapp.jobs.configs import ConfigError
from webapp.jobs.kinds import JOB_KINDS
from webapp.jobs.models import Job
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("config, message", [
    ({"env": "math", "split": "test"}, "split 'test' shares tasks with eval_split 'test' (math)"),
    ({"env": "twenty_questions", "split": "all"}, "split 'all' shares tasks with eval_split 'test'"),
    ({"env": "tool_use", "split": "synthetic_train", "eval_split": "synthetic"},
     "split 'synthetic_train' shares tasks with eval_split 'synthetic'"),
])
def test_it_refuses_an_iteration_that_trains_on_its_evaluation_split(personas, config, message):
    with pytest.raises(ConfigError) as caught:
        lifecycle.check_create_job(personas["researcher"], "nlac-iteration", config)
    assert caught.value.field == "split" and message in caught.value.message
    assert not Job.objects.exists()


@pytest.mark.parametrize("env, train, held_out", [("math", "train", "test"), ("twenty_questions", "train", "test"),
                                                  ("tool_use", "synthetic_train", "synthetic_test")])
def test_it_trains_on_the_train_split_and_evaluates_on_the_held_out_one_by_default(env, train, held_out):
    assert JOB_KINDS["nlac-iteration"].config.parse({"env": env}).train_split() == train
    assert JOB_KINDS["evaluate"].config.parse({"env": env}).task_split() == held_out
    assert JOB_KINDS["evaluate"].config.parse({"env": env, "split": "all"}).task_split() == "all"  # asked for: as asked
    assert JOB_KINDS["rollout"].config.parse({"env": env}).task_split() == ""  # a plain rollout: the env default
