"""Export trajectories as our lossless JSONL (streamed, constant memory)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from django.db.models import Prefetch, QuerySet

from nlac_core.formats import nlac_jsonl
from nlac_core.records import TrajectoryRecord
from webapp.trajectories import convert
from webapp.trajectories.models import Message, Trajectory

CHUNK = 200


def iter_records(trajectories: QuerySet[Trajectory]) -> Iterator[TrajectoryRecord]:
    """Records in id order, CHUNK trajectories (and their messages) at a time."""
    for _, record in iter_with_ids(trajectories):
        yield record


def iter_with_ids(trajectories: QuerySet[Trajectory]) -> Iterator[tuple[int, TrajectoryRecord]]:
    """(trajectory id, record) in id order, CHUNK trajectories (and their messages) at a time."""
    last_id = 0
    base = trajectories.order_by("id").select_related("task")
    while True:
        chunk = list(base.filter(id__gt=last_id).prefetch_related(
            Prefetch("messages", queryset=Message.objects.order_by("position")))[:CHUNK])
        if not chunk:
            return
        for t in chunk:
            yield t.pk, convert.trajectory_record(t, t.messages.all())
        last_id = chunk[-1].id


def do_export_jsonl(trajectories: QuerySet[Trajectory], out: IO[str]) -> int:
    return nlac_jsonl.write(iter_records(trajectories), out)
