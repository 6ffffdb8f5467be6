"""A big file read by several reader processes (webapp/trajectories/services/import_readers.py) stores exactly what one
process stores, in the same order; bad input fails it with the same error, naming the same place, and no reader
process is left behind. The size threshold is lowered so that the real files of the data folder go in parallel."""

from __future__ import annotations

import json

import psutil
import pytest

from tests.conftest import TAU2_GROK, TAU_GPT4O, needs_shared
from tests.webapp.test_bad_files import JSON_ARRAY_CASES, OK_RECORD
from webapp.trajectories.models import ImportBatch, Message, Task, Trajectory
from webapp.trajectories.services import import_readers
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def parallel(settings, monkeypatch):
    """Every import of a sharded format goes to reader processes, however small the file."""
    monkeypatch.setattr(import_readers, "PARALLEL_MIN_BYTES", 0)

    def readers(n: int) -> None:
        settings.NLAC_IMPORT_PROCESSES = n
    return readers


def stored(project) -> list[tuple]:
    trajectories = list(Trajectory.objects.filter(project=project).order_by("id").values_list(
        "record_index", "content_hash", "task__external_id", "reward", "n_messages", "preview", "reward_info",
        "meta", "policy"))
    messages = list(Message.objects.filter(trajectory__project=project).order_by("id").values_list(
        "trajectory__record_index", "position", "role", "content", "tool_calls", "step_index", "meta"))
    return trajectories + messages


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.fixture(autouse=True)
def no_reader_left():
    """Every reader process is gone when the import returns (the session's browser, say, was there before)."""
    before = children()
    yield
    assert children() <= before


@needs_shared
@pytest.mark.parametrize("path,n", [(TAU_GPT4O, 2), (TAU_GPT4O, 3), (TAU2_GROK, 2)],
                         ids=["tau-bench, 2 readers", "tau-bench, 3 readers", "tau2-bench, 2 readers"])
def test_it_stores_what_one_process_stores(parallel, settings, tmp_path, path, n):
    settings.NLAC_IMPORT_PROCESSES = 1
    alone = do_import_file(path, do_get_or_create_project("one process"))
    parallel(n)
    together = do_import_file(path, do_get_or_create_project(f"{n} readers"))
    assert alone.ok and together.ok, together.batch.error
    for field in ("n_records", "n_added", "n_skipped", "n_tasks", "n_messages"):
        assert getattr(together.batch, field) == getattr(alone.batch, field) > 0 or field == "n_skipped"
    assert stored(together.batch.project) == stored(alone.batch.project)
    copy = tmp_path / f"copy of {path.name}"  # another file: read again, in parallel, every episode already there
    copy.write_bytes(path.read_bytes() + b"\n")
    again = do_import_file(copy, do_get_or_create_project(f"{n} readers"))
    assert again.ok and not again.already_imported
    assert again.batch.n_added == 0 and again.batch.n_skipped == alone.batch.n_added


@pytest.mark.parametrize("case", list(JSON_ARRAY_CASES))
def test_it_fails_a_bad_file_as_one_process_does(parallel, tmp_path, case):
    bad, expected = JSON_ARRAY_CASES[case]  # test_bad_files: what one process says when the bad record is record 1
    path = tmp_path / "tau.json"
    ok = [OK_RECORD.replace(b'"task_id": 1', b'"task_id": %d' % i) for i in range(1, 8)]
    path.write_bytes(b"[" + b",\n".join(ok) + b",\n" + bad)
    parallel(1)
    alone = do_import_file(path, do_get_or_create_project("p"))
    parallel(3)
    together = do_import_file(path, do_get_or_create_project("p"))
    assert not alone.ok and together.batch.error == alone.batch.error
    assert together.batch.error.startswith("tau.json, " + expected.split(":")[0].replace("record 1", "record 7")) \
        or expected.startswith("byte"), together.batch.error
    assert Trajectory.objects.count() == Message.objects.count() == Task.objects.count() == 0
    assert list(ImportBatch.objects.values_list("status", flat=True)) == [ImportBatch.FAILED] * 2


@pytest.mark.parametrize("first,later", [(40, 50), (50, 75), (3, 60)], ids=["reader 2 first", "reader 0 first",
                                                                         "a value too long, first"])
def test_it_names_the_first_bad_record_whichever_reader_meets_it(parallel, tmp_path, first, later):
    """Blocks of 16 records dealt to 3 readers: record 40 is reader 2's (block 2), 50 and 60 reader 0's (block 3),
    75 reader 1's (block 4); record 3 is the writer's to refuse (a task id longer than its column)."""
    assert import_readers.BLOCK == 16
    records = [{"task_id": i, "reward": 1, "info": {}, "traj": [{"role": "user", "content": f"hi {i}"}]}
               for i in range(100)]
    if first == 3:
        records[3]["task_id"] = "x" * 300
    else:
        records[first]["traj"][0]["role"] = "wizard"
    records[later]["reward"] = "high"
    path = tmp_path / "tau.json"
    path.write_text(json.dumps(records))
    parallel(1)
    alone = do_import_file(path, do_get_or_create_project("p"))
    parallel(3)
    together = do_import_file(path, do_get_or_create_project("p"))
    assert together.batch.error == alone.batch.error
    assert together.batch.error.startswith(f"tau.json, record {first}, field ")
