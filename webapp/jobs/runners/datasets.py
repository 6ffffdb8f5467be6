"""The dataset jobs: build-snapshot and export-snapshot (cpu queue, no model).

A build retried after a crash starts its snapshot again from nothing; a cancel marks the snapshot failed.
An export writes under a temporary name and renames at the end, so a download link never serves half a file.
"""

from __future__ import annotations

from typing import Any

from webapp.datasets.models import Export, Snapshot
from webapp.datasets.services.build import BuildStopped, do_build_snapshot, do_reopen_failed_build
from webapp.datasets.services.exports import do_write_export
from webapp.jobs.runners.base import JobContext


def run_build_snapshot(ctx: JobContext) -> dict[str, Any]:
    snapshot = Snapshot.objects.select_related("dataset__project").get(pk=ctx.config.snapshot)
    if snapshot.job_id != ctx.job.pk:
        raise ValueError(f"{snapshot.label} is built by job {snapshot.job_id}, not this one")
    if snapshot.status == Snapshot.READY:  # a re-run after the build finished but before the job did
        return {"snapshot": snapshot.pk, "records": snapshot.n_records, "content_hash": snapshot.content_hash,
                "splits": snapshot.card.get("splits", {})}
    if snapshot.status == Snapshot.FAILED and do_reopen_failed_build(snapshot):
        ctx.log(f"retrying the build of {snapshot.label}")
    ctx.log(f"building {snapshot.label} ({snapshot.dataset.get_kind_display()} of {snapshot.dataset.project.name})")
    last = [0]

    def progress(done: int, total: int) -> None:
        if done - last[0] >= 500 or done == total:
            last[0] = done
            ctx.progress(done, total, "build")

    try:
        snapshot = do_build_snapshot(snapshot, progress, should_stop=ctx.should_stop, still_owner=ctx.still_owner)
    except BuildStopped:
        if ctx.lost:
            return {"snapshot": snapshot.pk, "records": 0}  # the run that owns the job now reports
        ctx.log("stopped: the snapshot is marked failed; retry the job or build a new version")
        return {"snapshot": snapshot.pk, "records": 0}
    ctx.log(f"{snapshot.label}: {snapshot.n_records} records, sha256 {snapshot.content_hash[:12]}")
    return {"snapshot": snapshot.pk, "records": snapshot.n_records, "content_hash": snapshot.content_hash,
            "splits": snapshot.card.get("splits", {})}


def run_export_snapshot(ctx: JobContext) -> dict[str, Any]:
    export = Export.objects.select_related("snapshot__dataset").get(pk=ctx.config.export)
    total = export.snapshot.n_records
    ctx.progress(0, total, "export")
    try:
        export = do_write_export(export, ctx.job.attempts, lambda n: ctx.progress(min(n, total), total))
    except Exception:
        if ctx.still_owner():
            Export.objects.filter(pk=export.pk).update(status=Export.FAILED)
        raise
    ctx.progress(total, total)
    ctx.log(f"wrote {export.n_records} records to {export.path} ({export.size_bytes} bytes)")
    return {"export": export.pk, "records": export.n_records, "bytes": export.size_bytes, "format": export.format}
