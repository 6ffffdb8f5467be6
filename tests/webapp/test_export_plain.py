"""The export path reads trajectories straight from rows (convert.plain_trajectory, exports.iter_plain): what it gives
is ``to_dict`` of the record made from the stored model instances, for real runs of every shape (tau-bench with a
file-name label, tau2-bench with user tools, supervised rollouts' meta), on SQLite and PostgreSQL; and both export
formats read back to the same episodes."""

from __future__ import annotations

import io

import pytest

from nlac_core.formats import read
from nlac_core.records import to_dict
from tests.conftest import TAU2_GROK, TAU_GPT4O, needs_shared
from webapp.trajectories import convert
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services import exports
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = [pytest.mark.django_db, needs_shared]


@pytest.fixture
def project():
    project = do_get_or_create_project("both runs")
    for path in (TAU_GPT4O, TAU2_GROK):
        assert do_import_file(path, project).ok
    return project


def test_it_gives_what_the_records_give(project, monkeypatch):
    monkeypatch.setattr(exports, "CHUNK", 37)  # chunks that end mid-run
    plain = dict(exports.iter_plain(project.trajectories.all()))
    assert len(plain) == project.trajectories.count() == 220
    for t in project.trajectories.select_related("task").prefetch_related("messages"):
        expected = to_dict(convert.trajectory_record(t, t.messages.order_by("position")))
        assert plain[t.pk] == expected, t.pk
    assert list(plain) == sorted(plain)


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_it_exports_what_reads_back_to_the_same_episodes(project, tmp_path, fmt):
    ours = project.trajectories.filter(source_format="tau-bench")
    out = io.StringIO()
    assert exports.do_export(ours, out, fmt) == 200
    path = tmp_path / ("export.jsonl" if fmt == "nlac-jsonl" else "gpt-4o-airline.json")
    path.write_text(out.getvalue())
    back = [item.record for item in read(path) if hasattr(item.record, "messages")]
    stored = [r for _, r in exports.iter_with_ids(ours)]
    assert [r.content_hash() for r in back] == [r.content_hash() for r in stored]


def test_it_refuses_an_unknown_format(project):
    with pytest.raises(ValueError, match="format: expected one of nlac-jsonl, tau-bench"):
        exports.do_export(Trajectory.objects.all(), io.StringIO(), "csv")


@pytest.mark.django_db(transaction=True)  # the workers read with connections of their own: the rows are committed
@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_it_writes_the_same_file_with_several_processes(project, tmp_path, monkeypatch, fmt):
    import psutil

    from webapp import forked

    before = {p.pid for p in psutil.Process().children(recursive=True)}  # the session's browser, say

    monkeypatch.setattr(exports, "CHUNK", 23)
    monkeypatch.setattr(exports, "PARALLEL_MIN", 0)
    forks = []
    real = forked.in_order
    monkeypatch.setattr(forked, "in_order", lambda n, work, **kw: forks.append(n) or real(n, work, **kw))
    files = {}
    for n in (1, 3):
        files[n] = tmp_path / f"{n}.out"
        with files[n].open("w", encoding="utf-8") as out:
            assert exports.do_export(project.trajectories.all(), out, fmt, n=n) == 220
    assert files[3].read_bytes() == files[1].read_bytes() and forks == [3]
    text = io.StringIO()  # an output without a file under it takes the text
    exports.do_export(project.trajectories.all(), text, fmt, n=2)
    assert text.getvalue().encode() == files[1].read_bytes()
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before  # no worker left


def test_it_reads_json_text_written_by_hand(project):
    """A chunk's JSON values are decoded by one json.loads of their list: values not written by Django (white space
    around them, keys in another order) still read as themselves; text that is not one JSON value cannot be stored
    (a CHECK on SQLite, jsonb on PostgreSQL), which is what makes their list one JSON value."""
    from django.db import DatabaseError, connection, transaction

    first = project.trajectories.order_by("id").first()
    update = "UPDATE trajectories_message SET meta = %s WHERE trajectory_id = %s AND position = 0"
    with connection.cursor() as cur:
        cur.execute(update, ['  {"b": [1, 2], "a": null}\n', first.pk])
    plain = dict(exports.iter_plain(project.trajectories.filter(pk=first.pk)))
    assert plain[first.pk]["messages"][0]["meta"] == {"a": None, "b": [1, 2]}
    assert plain[first.pk]["messages"][1]["meta"] == {}
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cur:
        cur.execute(update, ["1, 2", first.pk])
