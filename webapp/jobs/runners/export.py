"""export: the selected trajectories to our lossless JSONL under NLAC_JOBS_DIR/exports/ (cpu queue, no model).

Written through a temporary file and renamed at the end, so a download link
never points at half a file; a re-run writes the file again from the start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from nlac_core.formats import nlac_jsonl
from webapp.jobs.runners.base import JobContext
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_plain


def export_path(job_id: int) -> Path:
    return Path(settings.NLAC_JOBS_DIR) / "exports" / f"job-{job_id}.jsonl"


def run_export(ctx: JobContext) -> dict[str, Any]:
    ids = ctx.selection.trajectory_ids
    path = export_path(ctx.job.pk)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{ctx.job.attempts}.part")  # a reaped run never writes the new run's file
    total = len(ids)
    written = 0
    ctx.progress(0, total, "export")
    with tmp.open("w", encoding="utf-8") as out:
        for _, data in iter_plain(Trajectory.objects.filter(pk__in=ids)):
            out.write(nlac_jsonl.dumps_plain(data) + "\n")
            written += 1
            if written % 200 == 0:
                ctx.progress(written, total)
                if ctx.should_stop(fresh=True):
                    break
    if ctx.should_stop(fresh=True) or not ctx.still_owner():
        tmp.unlink(missing_ok=True)
        return {"trajectories": 0}
    tmp.replace(path)
    ctx.progress(written, total)
    return {"trajectories": written, "file": path.name, "bytes": path.stat().st_size}
