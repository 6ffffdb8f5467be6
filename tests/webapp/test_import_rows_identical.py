"""The bulk loader (webapp/bulk.py: COPY on PostgreSQL, executemany on SQLite) stores exactly what Django's ORM
stores: real runs imported through it, and the same values saved by ``bulk_create`` into another project, give the
same columns, byte for byte on SQLite (JSON written as json.dumps text), value for value on PostgreSQL; and
``to_dict``, which the content hash is made of, gives what the generic dataclass walk gave."""

from __future__ import annotations

from dataclasses import fields, is_dataclass

import pytest
from django.db import connection
from django.utils import timezone

from nlac_core.formats import read
from nlac_core.records import to_dict
from tests.conftest import TAU2_GROK, TAU_GPT4O, needs_shared
from webapp.trajectories import convert
from webapp.trajectories.models import ImportBatch, Message, Task, Trajectory
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = [pytest.mark.django_db, needs_shared]

SKIP_TRAJECTORY = {"id", "project_id", "import_batch_id", "created_at", "task_id"}


def rows(table: str, columns: list[str], where: str, params: list) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {where}", params)
        return cur.fetchall()


def saved_by_the_orm(path, name: str):
    """The file's records saved with bulk_create (model instances, Django's own SQL), as the importer did before."""
    project = do_get_or_create_project(name)
    batch = ImportBatch.objects.create(project=project, file_name=path.name, status=ImportBatch.SUCCEEDED)
    items = list(read(path))
    tasks = {}
    for item in items:
        task = item.record if not hasattr(item.record, "messages") else item.record.task
        key = (task.external_id, task.content_hash())
        if key not in tasks:
            tasks[key] = Task.objects.create(project=project, external_id=key[0], content_hash=key[1],
                                             **convert.task_fields(task))
    now = timezone.now()
    for item in items:
        record = item.record
        if not hasattr(record, "messages"):
            continue
        values = convert.in_context(
            convert.trajectory_values(record, record.content_hash(), source_format=read_format(path),
                                      imported_from=path.name, record_index=item.index),
            project.pk, tasks[(record.task.external_id, record.task.content_hash())].pk, batch.pk, now)
        trajectory = Trajectory.objects.bulk_create([Trajectory(**dict(zip(convert.TRAJECTORY_COLUMNS, values,
                                                                           strict=True)))])[0]
        Message.objects.bulk_create([Message(**dict(zip(convert.MESSAGE_COLUMNS, m, strict=True)))
                                     for m in convert.message_values(record, trajectory.pk)])
    return project


def read_format(path) -> str:
    from nlac_core.formats import detect
    return detect(path)


@pytest.mark.parametrize("path", [TAU_GPT4O, TAU2_GROK], ids=["tau-bench", "tau2-bench"])
def test_it_stores_what_the_orm_stores(path):
    imported = do_import_file(path, do_get_or_create_project("bulk-loaded"))
    assert imported.ok, imported.batch.error
    by_orm = saved_by_the_orm(path, "saved by the ORM")
    columns = [f.column for f in Trajectory._meta.concrete_fields if f.column not in SKIP_TRAJECTORY]
    ours = rows("trajectories_trajectory", columns, "project_id = %s ORDER BY record_index",
                [imported.batch.project_id])
    theirs = rows("trajectories_trajectory", columns, "project_id = %s ORDER BY record_index", [by_orm.pk])
    assert len(ours) == len(theirs) == imported.batch.n_added > 0
    for a, b in zip(ours, theirs, strict=True):
        assert a == b
    message_columns = [f.column for f in Message._meta.concrete_fields if f.column not in ("id", "trajectory_id")]
    join = ("trajectories_message m JOIN trajectories_trajectory t ON t.id = m.trajectory_id")
    select = ["t.record_index"] + [f"m.{c}" for c in message_columns]
    ours = rows(join, select, "t.project_id = %s ORDER BY t.record_index, m.position", [imported.batch.project_id])
    theirs = rows(join, select, "t.project_id = %s ORDER BY t.record_index, m.position", [by_orm.pk])
    assert len(ours) == len(theirs) == imported.batch.n_messages
    assert ours == theirs
    task_columns = [f.column for f in Task._meta.concrete_fields if f.column not in ("id", "project_id")]
    ours = rows("trajectories_task", task_columns, "project_id = %s ORDER BY id", [imported.batch.project_id])
    theirs = rows("trajectories_task", task_columns, "project_id = %s ORDER BY id", [by_orm.pk])
    assert ours == theirs and len(ours) == imported.batch.n_tasks > 0
    # ids follow the file's order, as bulk_create gave them
    ids = list(Trajectory.objects.filter(project_id=imported.batch.project_id).order_by("record_index")
               .values_list("id", flat=True))
    assert ids == sorted(ids)


def _generic(value):
    """The plain form as records.to_dict made it before it was written out field by field."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _generic(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_generic(v) for v in value]
    return value


@pytest.mark.parametrize("path", [TAU_GPT4O, TAU2_GROK], ids=["tau-bench", "tau2-bench"])
def test_it_hashes_the_same_plain_form(path):
    for item in read(path):
        if hasattr(item.record, "messages"):
            expected = _generic(item.record)
            if not expected["source_model_from_file_name"]:
                del expected["source_model_from_file_name"]
            assert to_dict(item.record) == expected


@pytest.mark.skipif(connection.vendor != "postgresql", reason="compression is PostgreSQL's")
def test_it_compresses_a_policy_with_lz4_on_postgres():
    """Migration 0009: a run's policy, long enough to be compressed, is compressed with LZ4 (not pglz) in the
    trajectory's row and in its system message, and reads back whole."""
    imported = do_import_file(TAU_GPT4O, do_get_or_create_project("lz4"))
    assert imported.ok
    with connection.cursor() as cur:
        cur.execute("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
        if "lz4" not in (cur.fetchone()[0] or []):
            pytest.skip("this PostgreSQL was built without LZ4")
        cur.execute("SELECT pg_column_compression(t.policy), pg_column_compression(m.content), "
                    "length(t.policy), t.policy = m.content FROM trajectories_trajectory t "
                    "JOIN trajectories_message m ON m.trajectory_id = t.id AND m.role = 'system' "
                    "WHERE t.project_id = %s", [imported.batch.project_id])
        stored = cur.fetchall()
    assert stored and all(row == ("lz4", "lz4", row[2], True) and row[2] > 2000 for row in stored)


def test_it_checks_foreign_keys_as_rows_are_written_then_defers_them_again():
    """bulk.checked_as_written: inside it (an import), a message naming no trajectory is refused by its own statement
    on PostgreSQL (not at a commit the import holds up); after it, Django's deferral is back. SQLite: unchanged."""
    from django.db import IntegrityError, transaction

    from webapp import bulk

    def orphan():
        with connection.cursor() as cur:
            cur.execute("INSERT INTO trajectories_message (trajectory_id, position, role, content, tool_calls, "
                        "tool_call_id, name, requestor, turn_idx, step_index, meta) "
                        "VALUES (987654321, 0, 'user', 'x', '[]', NULL, NULL, NULL, NULL, NULL, '{}')")

    with transaction.atomic():
        with bulk.checked_as_written(Task, Trajectory, Message):
            if connection.vendor == "postgresql":
                with pytest.raises(IntegrityError), transaction.atomic():
                    orphan()
        with transaction.atomic():
            sid = transaction.savepoint()
            orphan()  # deferred: taken now, refused at commit
            transaction.savepoint_rollback(sid)
