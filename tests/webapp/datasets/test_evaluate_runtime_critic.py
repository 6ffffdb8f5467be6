"""evaluate-critic on a runtime-critic snapshot: the first-error labels of a real recorded run (the gpt-4o tau-bench
airline episodes) are the reference, a scripted critic's P(intervene) is scored against them with the figures of
``nlac_core.critic_eval`` (the CLI's, on the same records), beside the base checkpoint on the same steps; the job
page, the compare page and the API show them."""

from __future__ import annotations

import json

import pytest

from nlac_core.backends.fake import FakeBackend
from tests.nlac_core.scripted_critic import proposed
from webapp.jobs import loaded_model
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)

CHANGES = ("update_", "cancel_", "book_", "send_")


def child_critic() -> FakeBackend:
    """Intervenes (by likelihood) on state-changing calls, more surely the longer the call: a critic with a real,
    imperfect signal (first errors are mostly wrong state-changing calls)."""
    def score(request):
        action = proposed(request)
        changes = any(c in action for c in CHANGES)
        lean = (1.0 + len(action) / 400) if changes else -1.0
        return lean if request.continuation.strip() == "intervene" else 0.0
    return FakeBackend(model="child-critic", responder=lambda r: " fine", scorer=score)


def base_critic() -> FakeBackend:
    """Approves everything, with the same likelihoods whatever it reads."""
    return FakeBackend(model="base-critic", responder=lambda r: " fine",
                       scorer=lambda r: -2.0 if r.continuation.strip() == "intervene" else 0.0)


def test_it_scores_a_runtime_critic_against_first_error_labels_beside_its_base(tau_project, personas, client_for,
                                                                              tmp_path):
    from nlac_core.critic_eval import critic_report, judge_runtime_records
    from webapp.datasets.models import Snapshot
    from webapp.datasets.services.datasets import check_create_dataset
    from webapp.jobs.services.checkpoints import embedded_checkpoint

    researcher = personas["researcher"]
    check_create_dataset(researcher, "labels", "runtime_critic", tau_project, {"fractions": [0.5, 0, 0.5]})
    ids = list(tau_project.trajectories.order_by("id").values_list("id", flat=True))
    data = lifecycle.check_create_job(researcher, "critic-data", {"train": False, "dataset": "labels"},
                                      {"trajectory_ids": ids})
    assert execute(data.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=data.pk).error
    snapshot = Snapshot.objects.get(pk=Job.objects.get(pk=data.pk).outputs["snapshot"])
    test = list(snapshot.records.filter(split="test").order_by("position"))
    assert test and {r.source for r in test} == {"label"}

    base = embedded_checkpoint()
    child = Checkpoint.objects.create(name="child critic", path=str(tmp_path / "child"), parent=base, kind="critic")
    loaded_model.override(lambda config, checkpoint: child_critic() if checkpoint == child else base_critic())
    try:
        job = lifecycle.check_create_job(researcher, "evaluate-critic", {
            "snapshot": snapshot.pk, "checkpoint": child.pk, "split": "test", "max_steps": 1000, "chunk_size": 16})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
    finally:
        loaded_model.override(None)
    out = Job.objects.get(pk=job.pk).outputs
    critic = out["critic"]
    labels = [r.data["provenance"]["decision"] == "intervene" for r in test]
    assert out["kind"] == "runtime_critic" and critic["n"] == len(test) == out["evaluated"]
    assert critic["positives"] == sum(labels) and 0 < sum(labels) < len(test)
    assert critic["tasks"] == len({r.task_key for r in test})
    # the CLI's path (the critic on each record's own prompt) gives the job's figures
    same = critic_report(judge_runtime_records(child_critic(), [r.data for r in test], [r.task_key for r in test]))
    assert critic == json.loads(json.dumps(same))
    assert critic["auroc"] > 0.5 and critic["auroc_ci95"] is not None
    # the base approves everything: positivity 1, balanced accuracy 0.5, every score tied (AUROC 0.5)
    assert out["base"]["checkpoint"] == base.pk and out["base"]["from_job"] is None
    assert out["base"]["positivity"] == 1.0 and out["base"]["balanced_accuracy"] == 0.5
    assert out["base"]["auroc"] == 0.5 and out["base"]["n"] == critic["n"]
    assert out["verdict"]["labels"] == ["approve", "intervene"] and out["verdict"]["n"] == len(test)

    client = client_for("researcher")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="critic-figures"' in page and f"{critic['auroc']:.3f}" in page and 'class="auroc-mark base"' in page
    compare = client.get(f"/checkpoints/compare/?id={child.pk}&snapshot={snapshot.pk}").content.decode()
    assert 'data-figure="false_alarm_rate"' in compare and "base: 1.000" in compare  # the base's positivity
    assert 'id="auroc-chart"' in compare and compare.count('class="auroc-mark') == 2
    api = client.get(f"/api/evaluations?checkpoint={child.pk}").json()
    assert api[0]["outputs"]["critic"]["auroc"] == critic["auroc"]
    assert api[0]["outputs"]["base"]["positivity"] == 1.0
    snapshot_page = client.get(f"/snapshots/{snapshot.pk}/").content.decode()
    assert "first errors" in snapshot_page and f"AUROC {critic['auroc']:.3f}" in snapshot_page


def test_it_refuses_a_snapshot_of_another_kind(project, gold_set, personas):
    from tests.webapp.datasets.conftest import build, make_dataset
    from webapp.jobs.configs import ConfigError

    snapshot = build(make_dataset(project, name="episodes", kind="trajectories"))
    with pytest.raises(ConfigError, match="critic targets or runtime critic snapshot"):
        lifecycle.check_create_job(personas["researcher"], "evaluate-critic", {"snapshot": snapshot.pk})
