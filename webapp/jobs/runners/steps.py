"""The step jobs' shared loop (critique, backup, refine, replay-critic): what is left of this run's share of the
selection, then whole chunks computed and committed one at a time.

A runner: ``items = selected_steps(...)`` (a fixed order), ``work = steps_to_do(ctx, Table, items, phase)``,
``write_in_chunks(ctx, work, chunk_size, make_rows, verb)``; its outputs count the rows of ``output_jobs(ctx)``
(the job and its shards, ``shards.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from webapp.jobs.models import StepOutput
from webapp.jobs.runners import shards
from webapp.jobs.runners.base import JobContext
from webapp.jobs.runners.shards import output_jobs

__all__ = ["StepWork", "output_jobs", "steps_to_do", "write_in_chunks"]


@dataclass
class StepWork:
    """A step job's items ((trajectory id, step, ...) tuples in selection order), the positions this run works on
    (a shard's share, else all) and, of those, what is still to write."""

    items: list
    positions: range
    todo: set[int]

    @property
    def total(self) -> int:
        return len(self.positions)


def steps_to_do(ctx: JobContext, table: type[StepOutput], items: list, phase: str, what: str = "done") -> StepWork:
    """The step jobs' start: of ``items`` (in a fixed order), those of this run's share (``shards.span``) that
    neither this job nor its shards have written to ``table`` yet, so a re-run after a crash or a cancel does only
    the rest; logged, and progress set to what is already done."""
    config = ctx.config
    chunk = getattr(config, "chunk_size", 1)
    positions = shards.span(len(items), chunk, getattr(config, "shard", None), getattr(config, "shards", 1))
    done = set(table.objects.filter(job__in=shards.output_jobs(ctx)).values_list("trajectory_id", "step_index"))
    todo = {i for i in positions if (items[i][0], items[i][1].index) not in done}
    total = len(positions)
    share = f" (shard {config.shard + 1} of {config.shards}: steps {positions.start + 1}-{positions.stop})" \
        if getattr(config, "shard", None) is not None else ""
    ctx.log(f"{total} steps selected{share}, {total - len(todo)} already {what}, {len(todo)} to go")
    ctx.progress(total - len(todo), total, phase)
    return StepWork(items, positions, todo)


def write_in_chunks(ctx: JobContext, work: StepWork, chunk_size: int, make_rows, verb: str) -> int:
    """The step jobs' loop over whole chunks of the selection (a chunk starts at a multiple of ``chunk_size``):
    ``make_rows(pending, seed_offset)`` computes the result rows (unsaved model instances) of a chunk's items
    still to do, ``seed_offset`` being the chunk's place in the selection (``shards.chunk_seed``); they are
    committed together while this worker still owns the job; a cancel or a lost lease stops it between chunks.
    Rows are unique per (job, step), so a chunk written twice is written once. Returns the number of items done,
    those of earlier runs included."""
    written = work.total - len(work.todo)
    for start in range(work.positions.start, work.positions.stop, chunk_size):
        pending = [work.items[i] for i in range(start, min(start + chunk_size, work.positions.stop))
                   if i in work.todo]
        if not pending:
            continue
        if ctx.should_stop(fresh=True):
            ctx.log("stopping between chunks" + (" (cancelled)" if ctx.cancelled else " (lease lost)"))
            break
        rows = make_rows(pending, start)
        with transaction.atomic():
            if not ctx.still_owner():
                break  # reaped while this chunk ran: the run that owns the job now writes these steps
            if rows:
                type(rows[0]).objects.bulk_create(rows, ignore_conflicts=True)
        written += len(pending)
        ctx.progress(written, work.total)
        ctx.log(f"{verb} {written}/{work.total} steps")
    return written
