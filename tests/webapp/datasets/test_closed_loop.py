"""The whole loop on the real embedded model: gold revisions -> snapshot -> train-critic job -> checkpoint ->
evaluate-critic jobs (base and trained) -> the comparison page shows both, and lineage ties them together."""

from __future__ import annotations

import pytest

from tests.webapp.datasets.conftest import build, make_dataset
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.runners.base import execute
from webapp.jobs.services import lifecycle

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.django_db(transaction=True)]


def test_it_closes_the_loop_from_human_edits_to_a_compared_checkpoint(project, gold_set, personas, client_for):
    researcher = personas["researcher"]
    snapshot = build(make_dataset(project, name="loop critic", fractions=[0.5, 0, 0.5], max_state_chars=600))
    assert snapshot.card["splits"]["train"] and snapshot.records.filter(split="test", source="gold").exists()

    train = lifecycle.check_create_job(researcher, "train-critic", {
        "snapshot": snapshot.pk, "max_steps": 2, "max_length": 768, "name": "critic-loop"})
    assert execute(train.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=train.pk).error
    train.refresh_from_db()
    trained = Checkpoint.objects.get(pk=train.outputs["checkpoint_produced"])
    assert trained.produced_by == train and train.outputs["records"] == snapshot.card["splits"]["train"]

    scores, jobs = {}, {}
    for checkpoint in (None, trained.pk):
        job = lifecycle.check_create_job(researcher, "evaluate-critic", {
            "snapshot": snapshot.pk, "checkpoint": checkpoint, "split": "test", "max_steps": 3, "chunk_size": 3,
            "max_state_chars": 600})
        assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
        job.refresh_from_db()
        out = job.outputs
        assert out["evaluated"] == 3 and out["verdict"]["n"] == 3
        assert sum(sum(row.values()) for row in out["verdict"]["confusion"].values()) == 3
        assert 0 <= out["verdict"]["accuracy"] <= 1 and 0 <= out["similarity"] <= 1
        assert out["calibration"]["n"] == 3 and sum(b["n"] for b in out["calibration"]["bins"]) == 3
        assert out["critic"]["n"] == 3 and out["critic"]["majority"]["accuracy"] is not None
        scores[job.checkpoint_id], jobs[job.checkpoint_id] = out, job.pk
    base = next(pk for pk in scores if pk != trained.pk)
    # the base is the trained checkpoint's baseline on the same steps, taken from its own evaluation
    assert scores[base]["base"]["skipped"] and scores[trained.pk]["base"]["checkpoint"] == base
    assert scores[trained.pk]["base"]["from_job"] == jobs[base]
    assert {k: scores[trained.pk]["base"][k] for k in ("n", "auroc", "positivity")} == \
        {k: scores[base]["critic"][k] for k in ("n", "auroc", "positivity")}

    client = client_for("researcher")
    page = client.get(f"/checkpoints/compare/?id={base}&id={trained.pk}").content.decode()
    assert "critic-loop" in page and Checkpoint.objects.get(pk=base).name in page
    # reliability diagrams of P(success) and of P(flag), one line per checkpoint each
    assert page.count('class="bar"') >= 2 and page.count('class="reliability"') == 4
    assert 'id="auroc-chart"' in page and 'data-figure="balanced_accuracy"' in page and "base: " in page
    detail = client.get(f"/jobs/{jobs[trained.pk]}/").content.decode()
    assert 'id="critic-figures"' in detail and "base checkpoint" in detail
    lineage = client.get(f"/checkpoints/{trained.pk}/").content.decode()
    gold = snapshot.records.filter(split="train", source="gold").count()
    assert f"trained on loop critic v1, built from {gold} gold revisions by 1 annotator" in lineage
    assert "evaluate-critic" in lineage
