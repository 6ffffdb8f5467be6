"""Step jobs split across workers: a parent with ``shards`` > 1 runs no model itself.

Its first run freezes the selection (the trajectory ids it resolved) and starts one child job of the same kind
per shard, each with ``shard`` set; then it waits without holding a worker (WAITING, as nlac-iteration does)
and each shard's end queues it again. Any worker may take any shard, and each shard is a job of its own:
progress, log, cancel, retry and resume (what it wrote is skipped on a re-run) work per shard. Once every shard
has succeeded the parent runs its kind's runner over the whole selection, which finds every step written (by
its shards) and reports the outputs over all of them. A failed shard fails the parent (a retry of the parent
retries the failed and cancelled shards, ``lifecycle.do_retry``); a cancelled shard cancels it.

A shard is a contiguous run of whole chunks of the selection (``span``), and a chunk's seed follows its place
in the selection (``chunk_seed``): every chunk is the same batch with the same seed whichever shard runs it, so
the rows are those of the one-shard run.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.jobs.models import Job
from webapp.jobs.runners.base import JobContext, WaitForChildren
from webapp.jobs.services import lifecycle


def span(n_items: int, chunk_size: int, shard: int | None, shards: int) -> range:
    """The item positions shard ``shard`` of ``shards`` works on (all of them for an unsharded job): whole
    chunks, split as evenly as chunks allow."""
    if shard is None or shards <= 1:
        return range(n_items)
    chunks = -(-n_items // chunk_size)
    first, last = shard * chunks // shards, (shard + 1) * chunks // shards
    return range(min(first * chunk_size, n_items), min(last * chunk_size, n_items))


def chunk_seed(seed: int, start: int) -> int:
    """The seed of the chunk that starts at item position ``start`` of the selection."""
    return seed + start


def shard_jobs(job: Job) -> list[Job]:
    return list(job.children.order_by("id"))


def is_parent(config: dict[str, Any] | None) -> bool:
    """Whether a job's stored config makes it a sharded parent (more than one shard, none of them itself)."""
    config = config or {}
    return config.get("shards", 1) > 1 and config.get("shard") is None


def fan_out(ctx: JobContext, n_items: int, **frozen: Any) -> dict[str, Any] | None:
    """For a parent (``shards`` > 1, no ``shard``): start its shards or wait for them (WaitForChildren), and
    return None once all succeeded (the runner then reports over the whole selection), or the parent's outputs
    when a shard was cancelled (the parent ends cancelled). A shard or an unsharded job returns None at once.
    ``n_items``: the size of the selection (each shard's share is known, and shown, before it starts);
    ``frozen``: settings the parent resolved that its shards take as given (the backup's target network)."""
    config = ctx.config
    if not is_parent(ctx.job.config):
        return None
    children = shard_jobs(ctx.job)
    if not children:
        ids = list(ctx.selection.trajectory_ids)  # resolved when the job was made: the shards take the same
        with transaction.atomic():  # all shards or none: a parent that dies here starts them all again
            for shard in range(config.shards):
                child = lifecycle.check_create_job(ctx.job.created_by, ctx.job.kind,
                                                   {**config.to_dict(), **frozen, "shard": shard},
                                                   {"trajectory_ids": ids}, parent=ctx.job)
                share = span(n_items, getattr(config, "chunk_size", 1), shard, config.shards)
                Job.objects.filter(pk=child.pk, progress_total=0).update(progress_total=len(share))
        ctx.outputs(shards=[c.pk for c in shard_jobs(ctx.job)])
        ctx.progress(0, n_items, "shards")
        raise WaitForChildren(f"started {config.shards} shards over the {n_items} steps of {len(ids)} trajectories")
    ctx.progress(sum(c.progress_done for c in children), sum(c.progress_total for c in children), "shards")
    state = dict(ctx.job.outputs or {})
    if any(c.status in (Job.QUEUED, Job.RUNNING, Job.WAITING) for c in children):
        done = sum(c.status == Job.SUCCEEDED for c in children)
        raise WaitForChildren(f"{done} of {len(children)} shards done")
    failed = [c for c in children if c.status == Job.FAILED]
    if failed:  # a retry of the parent retries these (lifecycle.do_retry)
        raise RuntimeError("shard " + "; shard ".join(f"job {c.pk} failed: {c.error}" for c in failed))
    cancelled = [c.pk for c in children if c.status == Job.CANCELLED]
    if cancelled:  # the parent ends cancelled; its retry resumes them
        ctx.cancelled = True
        ctx.log(f"shard job {cancelled[0]} was cancelled")
        return {**state, "shards": [c.pk for c in children], "cancelled_shards": cancelled}
    return None


def output_jobs(ctx: JobContext) -> list[int]:
    """The jobs whose rows are this job's results: itself and its shards."""
    return [ctx.job.pk, *(c.pk for c in shard_jobs(ctx.job))]


def outputs_with_shards(ctx: JobContext, outputs: dict[str, Any]) -> dict[str, Any]:
    shards = shard_jobs(ctx.job)
    return {**outputs, "shards": [c.pk for c in shards]} if shards else outputs
