"""Build and export jobs (run in this process), downloads, the CLI, and exports read by their consumers."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.webapp.datasets.conftest import build, make_dataset
from webapp.datasets.models import Export, Snapshot
from webapp.datasets.services.datasets import check_start_export, do_start_build
from webapp.datasets.services.exports import ExportError
from webapp.jobs.models import Job
from webapp.jobs.runners.base import execute

pytestmark = pytest.mark.django_db(transaction=True)


def _export(snapshot, fmt, split=""):
    export, job = check_start_export(None, snapshot, fmt, split)
    assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
    export.refresh_from_db()
    assert export.status == Export.READY
    return export


def test_it_builds_a_snapshot_as_a_cpu_job_with_progress(project, gold_set, sent):
    dataset = make_dataset(project)
    snapshot, job = do_start_build(None, dataset, "first cut <b>bold</b>")
    assert job.queue == "cpu" and job.kind == "build-snapshot" and sent == [job.pk]
    assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
    job.refresh_from_db()
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.READY and snapshot.version == 1 and snapshot.n_records == 24
    assert snapshot.card["counts_by_source"] == {"gold": 18, "bellman": 6}
    assert job.outputs["records"] == 24 and job.outputs["content_hash"] == snapshot.content_hash
    assert job.progress_done == job.progress_total == snapshot.card["steps_selected"]
    second, job2 = do_start_build(None, dataset)
    assert second.version == 2


def test_it_exports_every_format_and_their_consumers_read_them(project, gold_set, client_for, tmp_path):
    import datasets
    import pyarrow.parquet as pq

    snapshot = build(make_dataset(project))
    client = client_for("researcher")

    chat = _export(snapshot, "jsonl")
    response = client.get(f"/exports/{chat.pk}/download/")
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    assert response["Content-Disposition"].endswith('v1.jsonl"')
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(lines) == 24 and all(line["messages"][-1]["role"] == "assistant" for line in lines)
    loaded = datasets.load_dataset("json", data_files=chat.path, split="train")
    assert loaded.num_rows == 24 and "messages" in loaded.column_names

    train = _export(snapshot, "jsonl-prompt-completion", "train")
    rows = [json.loads(line) for line in Path(train.path).read_text(encoding="utf-8").splitlines()]
    assert len(rows) == snapshot.card["splits"]["train"] and set(rows[0]) == {"prompt", "completion"}

    parquet = _export(snapshot, "parquet")
    table = pq.read_table(parquet.path)
    assert table.num_rows == 24 and set(table.column("source").to_pylist()) == {"gold", "bellman"}

    hf = _export(snapshot, "hf")
    assert hf.path.endswith(".tar.gz")
    with tarfile.open(hf.path) as tar:
        tar.extractall(tmp_path, filter="data")
    (folder,) = list(tmp_path.iterdir())
    loaded = datasets.load_from_disk(str(folder))
    assert sum(len(loaded[s]) for s in loaded) == 24
    assert {s for s in loaded} == {s for s, n in snapshot.card["splits"].items() if n}


def test_it_exports_trajectories_that_import_back_to_the_same_episodes(project, tmp_path):
    from webapp.trajectories.models import Trajectory
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    snapshot = build(make_dataset(project, "trajectories"))
    hashes = set(project.trajectories.values_list("content_hash", flat=True))
    lossless = _export(snapshot, "nlac-jsonl")
    again = do_get_or_create_project("round trip")
    assert do_import_file(lossless.path, again).ok
    assert set(Trajectory.objects.filter(project=again).values_list("content_hash", flat=True)) == hashes
    chat = _export(snapshot, "jsonl")
    first = json.loads(Path(chat.path).read_text(encoding="utf-8").splitlines()[0])
    assert first["messages"] and "tools" in first
    tau = _export(snapshot, "tau-bench")
    assert len(json.loads(Path(tau.path).read_text(encoding="utf-8"))) == project.n_trajectories


def test_it_refuses_exports_it_cannot_write_naming_the_problem(project, gold_set):
    snapshot = build(make_dataset(project))
    with pytest.raises(ExportError, match="format: a critic targets snapshot exports as"):
        check_start_export(None, snapshot, "tau-bench")
    with pytest.raises(ExportError, match="split"):
        check_start_export(None, snapshot, "jsonl", "holdout")
    with pytest.raises(ExportError, match="leave the split empty"):
        check_start_export(None, snapshot, "hf", "train")
    building, _ = do_start_build(None, snapshot.dataset)
    with pytest.raises(ExportError, match="building"):
        check_start_export(None, building, "jsonl")
    assert not Export.objects.exists()


def test_it_exports_from_the_command_line(project, gold_set, tmp_path):
    dataset = make_dataset(project, name="critic gold")
    build(dataset)
    build(dataset)
    out = io.StringIO()
    call_command("export_dataset", "critic gold", "--version", "1", "--format", "parquet",
                 "--out", str(tmp_path / "v1.parquet"), stdout=out)
    assert "wrote 24 records of critic gold v1 as parquet" in out.getvalue()
    call_command("export_dataset", "critic gold", "--format", "jsonl", "--split", "test",
                 "--out", str(tmp_path / "test.jsonl"), stdout=out)
    assert "of critic gold v2" in out.getvalue()
    with pytest.raises(CommandError, match="no dataset named 'nope'"):
        call_command("export_dataset", "nope", "--format", "jsonl", "--out", str(tmp_path / "x"))
    with pytest.raises(CommandError, match=r"no built version 7 \(built: v1, v2\)"):
        call_command("export_dataset", "critic gold", "--version", "7", "--format", "jsonl", "--out", "x")
    with pytest.raises(CommandError, match="format"):
        call_command("export_dataset", "critic gold", "--format", "csv", "--out", str(tmp_path / "x"))


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("fmt", ["jsonl", "jsonl-prompt-completion"])
def test_it_exports_jsonl_that_trl_sfttrainer_trains_on_unchanged(project, gold_set, tmp_path, fmt):
    """The export is loaded with ``datasets.load_dataset("json")`` and handed to TRL's SFTTrainer as it is."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from nlac_core.backends.embedded import ensure_embedded_model

    export = _export(build(make_dataset(project, max_state_chars=400)), fmt, "train")
    train = datasets.load_dataset("json", data_files=export.path, split="train", cache_dir=str(tmp_path / "cache"))
    model_dir = str(ensure_embedded_model())
    args = SFTConfig(output_dir=str(tmp_path / "run"), max_steps=1, per_device_train_batch_size=2, max_length=512,
                     report_to="none", save_strategy="no", disable_tqdm=True, dataloader_pin_memory=False,
                     bf16=False)
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True), args=args,
                         train_dataset=train, processing_class=AutoTokenizer.from_pretrained(model_dir))
    result = trainer.train()
    assert result.global_step == 1 and result.training_loss > 0


def test_it_retries_a_failed_build_job_and_settles_a_cancelled_one(project, trajectory, client_for):
    from tests.webapp.datasets.conftest import add_target
    from webapp.jobs.services import lifecycle

    dataset = make_dataset(project)
    snapshot, job = do_start_build(None, dataset)
    assert execute(job.pk, "w:1") == Job.FAILED  # nothing has a target yet
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.FAILED
    add_target(trajectory, 0)
    lifecycle.do_retry(Job.objects.get(pk=job.pk))
    assert execute(job.pk, "w:1") == Job.SUCCEEDED, Job.objects.get(pk=job.pk).error
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.READY and snapshot.n_records == 1 and snapshot.version == 1

    queued, queued_job = do_start_build(None, dataset)
    lifecycle.do_request_cancel(queued_job)  # cancelled before any worker took it
    page = client_for("researcher").get(f"/snapshots/{queued.pk}/").content.decode()
    queued.refresh_from_db()
    assert queued.status == Snapshot.FAILED and 'hx-trigger="every 2s"' not in page
    export, export_job = check_start_export(None, snapshot, "jsonl")
    lifecycle.do_request_cancel(export_job)
    client_for("researcher").get(f"/snapshots/{snapshot.pk}/")
    export.refresh_from_db()
    assert export.status == Export.FAILED


def test_it_never_overwrites_a_directory_from_the_command_line(project, gold_set, tmp_path):
    build(make_dataset(project, name="critic gold"))
    target = tmp_path / "keep"
    target.mkdir()
    (target / "precious.txt").write_text("mine")
    with pytest.raises(CommandError, match="not an empty directory"):
        call_command("export_dataset", "critic gold", "--format", "hf", "--out", str(target))
    assert (target / "precious.txt").read_text() == "mine"
    with pytest.raises(CommandError, match="is a directory"):
        call_command("export_dataset", "critic gold", "--format", "jsonl", "--out", str(target))
    call_command("export_dataset", "critic gold", "--format", "hf", "--out", str(tmp_path / "fresh"),
                 stdout=io.StringIO())
    assert (tmp_path / "fresh" / "dataset_dict.json").is_file()
