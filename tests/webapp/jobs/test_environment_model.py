"""A fixed environment: the 20 Questions oracle and the tool-use simulated user come from the job's environment
model (default the embedded base model), never from the checkpoint being rolled out or evaluated, so two
checkpoints are scored in the same environment; every stored episode names its environment model."""

from __future__ import annotations

import pytest

from nlac_core.backends.fake import FakeBackend
from webapp.jobs import loaded_model
from webapp.jobs.configs import ConfigError
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle
from webapp.jobs.services.checkpoints import checkpoint_for
from webapp.trajectories.models import Trajectory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def backends(tmp_path):
    """A trained policy checkpoint and the embedded base: each path gets a scripted backend of its own."""
    trained = Checkpoint.objects.create(name="trained-policy", path=str(tmp_path / "trained"))
    embedded = checkpoint_for(None)
    made = {trained.path: FakeBackend(model="trained-policy", responder=lambda r: "Is it a cat?",
                                      scorer=lambda r: 0.0),
            embedded.path: FakeBackend(model="embedded-oracle", responder=lambda r: "No.", scorer=lambda r: 0.0)}
    loaded_model.override(lambda config, checkpoint: made[checkpoint.path])
    yield trained, embedded, made
    loaded_model.override(None)


def test_it_answers_a_trained_policy_with_the_base_model_not_with_itself(personas, backends):
    trained, embedded, made = backends
    job = lifecycle.check_create_job(personas["researcher"], "rollout", {
        "env": "twenty_questions", "checkpoint": trained.pk, "tasks": 2, "max_turns": 2, "project": "20Q env"})
    assert execute(job.pk, "w:1") == Job.SUCCEEDED
    stored = Trajectory.objects.filter(project__name="20Q env")
    assert stored.count() == 2
    assert {t.meta["env_model"] for t in stored} == {f"checkpoint:{embedded.name}"}
    assert {t.user_model for t in stored} == {"embedded-oracle"}  # the oracle that answered
    assert {t.source_model for t in stored} == {"trained-policy"}
    # the trained policy only asked questions; every oracle judgement went to the base model
    assert all(kind == "generate" for kind, _ in made[trained.path].calls)
    assert made[embedded.path].calls
    job.refresh_from_db()
    assert job.outputs["env_model"] == f"checkpoint:{embedded.name}"


def test_it_uses_the_environment_model_it_is_given(personas, backends):
    trained, embedded, made = backends
    job = lifecycle.check_create_job(personas["researcher"], "evaluate", {
        "env": "twenty_questions", "checkpoint": embedded.pk, "env_checkpoint": trained.pk, "tasks": 1,
        "max_turns": 1, "project": "20Q env 2"})
    assert execute(job.pk, "w:1") == Job.SUCCEEDED
    stored = Trajectory.objects.get(project__name="20Q env 2")
    assert stored.meta["env_model"] == "checkpoint:trained-policy" and stored.user_model == "trained-policy"


@pytest.mark.parametrize("config, field", [
    ({"env_endpoint": "nowhere", "env_endpoint_model": "m"}, "env_endpoint"),
    ({"env_checkpoint": 0}, "env_checkpoint"),
])
def test_it_refuses_an_environment_model_it_cannot_use(personas, config, field):
    with pytest.raises(ConfigError) as caught:
        lifecycle.check_create_job(personas["researcher"], "rollout", {"env": "tool_use", **config})
    assert caught.value.field == field
    assert not Job.objects.exists()
