"""Trajectories out of the database, streamed in bounded memory (a few chunks at a time): as plain dicts
(``records.to_dict`` form) for the exports and snapshot builds, or as records; and the project export in our
lossless JSONL or tau-bench JSON.

A chunk of CHUNK trajectories costs three queries (their rows, the tasks not met yet, their messages), read with a
plain cursor: no model instance, JSON decoded once per value (a task's once however many episodes it has), a query's
values by one ``json.loads``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import IO

from django.conf import settings
from django.db import connection
from django.db.models import JSONField, Model, QuerySet

from nlac_core.formats import dataset_exports, nlac_jsonl
from nlac_core.records import TrajectoryRecord, from_dict
from webapp import forked
from webapp.trajectories import convert
from webapp.trajectories.models import Message, Task, Trajectory

CHUNK = 500
PARALLEL_MIN = 2 * CHUNK  # below this, starting workers costs more than it saves
AHEAD = 48 << 20  # bytes of each export worker's encoded chunks held here (about 4 chunks of tau-bench episodes)
TASKS_KEPT = 5000  # decoded tasks kept between chunks; past that they are read again (memory stays flat)
FORMATS = ("nlac-jsonl", "tau-bench")


def _decoded(texts: list) -> list:
    """The stored JSON values (text on both databases; NULL is None), decoded: all of them by one ``json.loads`` of
    their list, rather than one call each (most messages hold an empty ``[]`` and ``{}``; half a million calls were a
    fifth of an export). Both databases hold each as one valid JSON value (SQLite by a CHECK, PostgreSQL's jsonb by
    its type), so their list is one too."""
    if None in texts:
        texts = ["null" if text is None else text for text in texts]
    values = json.loads("[" + ",".join(texts) + "]")
    assert len(values) == len(texts)
    return values


def _select(model: type[Model], columns: tuple[str, ...], key: str, values: Iterable[int]) -> list:
    """Rows of ``columns`` whose ``key`` is one of ``values``, ordered by ``key`` (and position, for messages),
    JSON columns decoded."""
    values = list(values)
    if not values:
        return []
    q = connection.ops.quote_name
    fields = {f.column: f for f in model._meta.concrete_fields}
    at = [i for i, c in enumerate(columns) if isinstance(fields[c], JSONField)]
    order = q(key) + (", " + q("position") if "position" in fields else "")
    sql = (f"SELECT {', '.join(q(c) for c in columns)} FROM {q(model._meta.db_table)} "
           f"WHERE {q(key)} IN ({', '.join(['%s'] * len(values))}) ORDER BY {order}")
    with connection.cursor() as cur:
        cur.execute(sql, values)
        rows = cur.fetchall()
    if not at or not rows:
        return rows
    # column by column: the JSON columns' texts decoded together, the rows made again from the columns (in C)
    by_column = list(zip(*rows, strict=True))
    decoded = _decoded([text for i in at for text in by_column[i]])
    for k, i in enumerate(at):
        by_column[i] = decoded[k * len(rows):(k + 1) * len(rows)]
    return list(zip(*by_column, strict=True))


def _chunks(trajectories: QuerySet[Trajectory]) -> Iterator[list[int]]:
    """The trajectories' ids in order, CHUNK at a time (keyset pagination: each chunk one indexed query)."""
    last_id = 0
    base = trajectories.order_by("id")
    while True:
        ids = list(base.filter(id__gt=last_id).values_list("id", flat=True)[:CHUNK])
        if not ids:
            return
        yield ids
        last_id = ids[-1]


def iter_plain(trajectories: QuerySet[Trajectory]) -> Iterator[tuple[int, dict]]:
    """(trajectory id, its ``to_dict`` form) in id order, CHUNK trajectories at a time."""
    tasks: dict[int, tuple] = {}
    for ids in _chunks(trajectories):
        yield from _plain_chunk(ids, tasks)


def _plain_chunk(ids: list[int], tasks: dict[int, tuple]) -> Iterator[tuple[int, dict]]:
    rows = _select(Trajectory, convert.PLAIN_TRAJECTORY_COLUMNS, "id", ids)
    if len(tasks) > TASKS_KEPT:
        tasks.clear()
    needed = {row[1] for row in rows} - tasks.keys()
    tasks.update((task[0], task) for task in _select(Task, convert.PLAIN_TASK_COLUMNS, "id", needed))
    messages: dict[int, list[tuple]] = {}
    for message in _select(Message, convert.PLAIN_MESSAGE_COLUMNS, "trajectory_id", ids):
        messages.setdefault(message[0], []).append(message)
    for row in rows:
        yield row[0], convert.plain_trajectory(row, tasks[row[1]], messages.get(row[0], []))


def iter_with_ids(trajectories: QuerySet[Trajectory]) -> Iterator[tuple[int, TrajectoryRecord]]:
    """(trajectory id, record) in id order, CHUNK trajectories (and their messages) at a time."""
    for pk, data in iter_plain(trajectories):
        yield pk, from_dict(data)


def iter_records(trajectories: QuerySet[Trajectory]) -> Iterator[TrajectoryRecord]:
    for _, record in iter_with_ids(trajectories):
        yield record


def processes() -> int:
    return forked.processes(getattr(settings, "NLAC_EXPORT_PROCESSES", 0))


def do_export(trajectories: QuerySet[Trajectory], out: IO[str], fmt: str = "nlac-jsonl",
              n: int | None = None) -> int:
    """Write the trajectories to ``out`` in ``fmt`` (FORMATS); how many. A big export (PARALLEL_MIN trajectories or
    more, outside a transaction, whose uncommitted rows another connection would not see) is made by ``n``
    processes (NLAC_EXPORT_PROCESSES, by default the cores, at most 4; ``webapp.forked``), chunk by chunk, each with
    its own connection: the file is the same, byte for byte."""
    if fmt not in FORMATS:
        raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    n = processes() if n is None else n
    parallel = (n > 1 and forked.available() and not connection.in_atomic_block
                and trajectories.count() >= PARALLEL_MIN)
    if fmt == "tau-bench":
        out.write(dataset_exports.TAU_BENCH_OPEN)
    write = _writer(out)
    total = 0
    for count, data in (_parts_in_parallel(trajectories, fmt, n) if parallel else _parts(trajectories, fmt)):
        if not count:
            continue  # a chunk whose rows were deleted while the export ran
        if total and fmt == "tau-bench":
            write(b",")
        write(data)
        total += count
    out.flush()
    if fmt == "tau-bench":
        out.write(dataset_exports.TAU_BENCH_CLOSE)
    return total


def _writer(out: IO[str]):
    """How UTF-8 bytes go to ``out``: straight to the file under it when it has one (a UTF-8 file, stdout)."""
    buffer = getattr(out, "buffer", None)
    if buffer is not None and (getattr(out, "encoding", "") or "").replace("-", "").lower() == "utf8":
        out.flush()
        return buffer.write
    return lambda data: out.write(data.decode("utf-8"))


def _text(fmt: str, chunk: Iterator[tuple[int, dict]]) -> tuple[int, bytes]:
    """A chunk of trajectories as it stands in a file of ``fmt``, UTF-8 (tau-bench: its elements, to be joined by
    ",")."""
    if fmt == "nlac-jsonl":
        lines = [nlac_jsonl.dumps_plain(data) + "\n" for _, data in chunk]
        return len(lines), "".join(lines).encode()
    elements = [dataset_exports.tau_bench_element(data) for _, data in chunk]
    return len(elements), ",".join(elements).encode()


def _parts(trajectories: QuerySet[Trajectory], fmt: str) -> Iterator[tuple[int, bytes]]:
    tasks: dict[int, tuple] = {}
    for ids in _chunks(trajectories):
        yield _text(fmt, _plain_chunk(ids, tasks))


def _parts_in_parallel(trajectories: QuerySet[Trajectory], fmt: str, n: int) -> Iterator[tuple[int, bytes]]:
    """Chunk ``i`` made by worker ``i mod n``. The chunks' bounds are read once, here, before the workers start, so
    that every worker cuts the same chunks whatever is added meanwhile (ids only grow: a trajectory added during the
    export is past the last bound, as it is for one process)."""
    bounds = [(ids[0], ids[-1]) for ids in _chunks(trajectories)]  # two ids a chunk: memory of the order of n/CHUNK

    def worker(k: int, n: int, send: forked.Send) -> None:
        tasks: dict[int, tuple] = {}
        for low, high in bounds[k::n]:
            ids = list(trajectories.filter(id__gte=low, id__lte=high).order_by("id").values_list("id", flat=True))
            send(_text(fmt, _plain_chunk(ids, tasks)))

    return forked.in_order(n, worker, ahead=AHEAD)


def do_export_jsonl(trajectories: QuerySet[Trajectory], out: IO[str]) -> int:
    return do_export(trajectories, out, "nlac-jsonl")
