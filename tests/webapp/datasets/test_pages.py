"""The dataset pages over HTTP: who may use them, the definition form's errors, escaping, launching from a
snapshot, and lineage shown both ways."""

from __future__ import annotations

import pytest

from tests.webapp.datasets.conftest import build, make_dataset
from webapp.datasets.models import Dataset, Snapshot
from webapp.jobs.models import Checkpoint, Job


def _form(project, **changes):
    data = {"name": "gold critic", "kind": "critic_targets", "project": project.slug, "outcome": "any",
            "disagreement": "any", "train": 80, "validation": 10, "test": 10, "split_seed": 0, "seed": 0}
    return {**data, **changes}


@pytest.mark.parametrize("who, code", [("researcher", 200), ("admin", 200), ("annotator", 403), ("reviewer", 403),
                                       ("outsider", 403)])
def test_it_lets_only_researchers_curate(project, gold_set, client_for, who, code):
    snapshot = build(make_dataset(project))
    client = client_for(who)
    for url in ("/datasets/", "/datasets/new/", f"/datasets/{snapshot.dataset_id}/", f"/snapshots/{snapshot.pk}/",
                "/checkpoints/compare/"):
        assert client.get(url).status_code == code, url
    response = client.post(f"/datasets/{snapshot.dataset_id}/build/")
    assert response.status_code == (302 if code == 200 else 403)


def test_it_creates_a_dataset_from_the_form_and_starts_its_build(project, gold_set, client_for):
    client = client_for("researcher")
    response = client.post("/datasets/new/", _form(project, notes="<script>alert(1)</script>"))
    assert response.status_code == 302
    dataset = Dataset.objects.get(name="gold critic")
    snapshot = dataset.snapshots.get()
    assert snapshot.version == 1 and snapshot.status == Snapshot.BUILDING
    assert Job.objects.get(pk=snapshot.job_id).kind == "build-snapshot"
    page = client.get(f"/snapshots/{snapshot.pk}/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert 'hx-trigger="every 2s"' in page  # polls while it builds


def test_it_names_the_bad_field_of_a_definition_and_creates_nothing(project, client_for):
    client = client_for("researcher")
    response = client.post("/datasets/new/", _form(project, name="<b>x</b>"))
    assert response.status_code == 400 and "name: 1 to 150 letters" in response.content.decode()
    response = client.post("/datasets/new/", _form(project, train=0, validation=0, test=0))
    assert response.status_code == 400 and "fractions" in response.content.decode()
    response = client.post("/datasets/new/", _form(project, min_reward=1, max_reward=0))
    assert response.status_code == 400 and "is above max_reward" in response.content.decode()
    assert not Dataset.objects.exists() and not Job.objects.filter(kind="build-snapshot").exists()


def test_it_shows_the_card_records_and_lets_a_researcher_launch_training(project, gold_set, client_for):
    snapshot = build(make_dataset(project))
    client = client_for("researcher")
    page = client.get(f"/snapshots/{snapshot.pk}/").content.decode()
    assert "gold: 18" in page and "bellman: 6" in page and 'id="train-button"' in page
    assert "Train critic on this" in page and "Evaluate a critic against the held-out human verdicts" in page
    assert client.get(f"/snapshots/{snapshot.pk}/?split=test").status_code == 200
    response = client.post(f"/snapshots/{snapshot.pk}/train/", {"max_steps": 3, "learning_rate": 1e-5,
                                                                "name": "critic-gold"})
    job = Job.objects.get(kind="train-critic")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.config["snapshot"] == snapshot.pk and job.config["max_steps"] == 3 and job.selection == {
        "trajectory_ids": []}
    response = client.post(f"/snapshots/{snapshot.pk}/evaluate/", {"split": "test", "max_steps": 5})
    evaluation = Job.objects.get(kind="evaluate-critic")
    assert evaluation.config["split"] == "test" and evaluation.queue == "gpu"
    response = client.post(f"/snapshots/{snapshot.pk}/export/", {"format": "tau-bench"})
    assert response.status_code == 302 and not snapshot.exports.exists()  # refused, with a message


def test_it_refuses_a_training_job_on_a_snapshot_of_the_wrong_kind(project, gold_set, personas):
    from webapp.jobs.configs import ConfigError
    from webapp.jobs.services import lifecycle

    trajectories = build(make_dataset(project, "trajectories"))
    with pytest.raises(ConfigError, match="takes a critic targets"):
        lifecycle.check_create_job(personas["researcher"], "evaluate-critic", {"snapshot": trajectories.pk})
    with pytest.raises(ConfigError, match="no built snapshot with id 999"):
        lifecycle.check_create_job(personas["researcher"], "train-critic", {"snapshot": 999})


def test_it_shows_lineage_from_the_checkpoint_and_from_the_revision(project, gold_set, client_for, personas):
    snapshot = build(make_dataset(project, name="critic gold"))
    job = Job.objects.create(kind="train-critic", status=Job.SUCCEEDED, config={"snapshot": snapshot.pk})
    checkpoint = Checkpoint.objects.create(name="critic-v1", path="/tmp/critic-v1", produced_by=job, kind="critic")
    client = client_for("researcher")
    page = client.get(f"/checkpoints/{checkpoint.pk}/").content.decode()
    train = snapshot.card["splits"]["train"]
    gold_in_train = snapshot.records.filter(split="train", source="gold").count()
    assert f"trained on critic gold v1, built from {gold_in_train} gold revisions by 1 annotator" in page
    assert train > gold_in_train > 0
    record = snapshot.records.filter(source="gold").first()
    history = client.get(f"/annotations/{record.revision.annotation_id}/").content.decode()
    assert "critic gold v1" in history and "critic-v1" in history
    # an annotator reads a history only of a step in one of their queues, and never the lineage
    assert client_for("annotator").get(f"/annotations/{record.revision.annotation_id}/").status_code == 404
    from webapp.annotation.services.queues import QueueSpec, check_create_queue

    check_create_queue(personas["researcher"], "all steps", project, QueueSpec(), 1, [personas["annotator"]])
    as_annotator = client_for("annotator").get(f"/annotations/{record.revision.annotation_id}/")
    assert as_annotator.status_code == 200 and "Used in" not in as_annotator.content.decode()
