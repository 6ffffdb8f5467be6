"""/checkpoints/compare/ charts policy pass^k side by side only when the evaluations ran in the same
environment (environment, split and the environment's own model); otherwise it says so and charts nothing."""

from __future__ import annotations

import pytest

from webapp.jobs.models import Checkpoint, Job

pytestmark = pytest.mark.django_db


def evaluation(checkpoint, env_model: str | None, split: str = "test"):
    outputs = {"pass_hat_k": {"1": 0.5}, "split": split, **({"env_model": env_model} if env_model else {})}
    return Job.objects.create(kind="evaluate", status=Job.SUCCEEDED, checkpoint=checkpoint,
                              config={"env": "twenty_questions"}, outputs=outputs)


def compare(client_for, *checkpoints):
    query = "&".join(f"id={c.pk}" for c in checkpoints)
    return client_for("researcher").get(f"/checkpoints/compare/?{query}").content.decode()


def test_it_charts_evaluations_of_one_environment_and_flags_mixed_ones(client_for):
    a = Checkpoint.objects.create(name="a", path="/m/a")
    b = Checkpoint.objects.create(name="b", path="/m/b")
    evaluation(a, "checkpoint:smollm2")
    evaluation(b, "checkpoint:smollm2")
    page = compare(client_for, a, b)
    assert 'id="mixed-environments"' not in page and page.count('class="bar"') == 2
    evaluation(b, None)  # an evaluation from before the environment model was fixed: the policy answered itself
    page = compare(client_for, a, b)
    assert 'id="mixed-environments"' in page and "environment model the policy itself" in page
    assert 'class="bar"' not in page.split('id="pass-chart"')[1].split("</figure>")[0]
