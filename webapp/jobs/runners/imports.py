"""import: a large uploaded file imported into a project on the cpu queue, with progress in records.

``do_import_file`` is atomic per file and recognises a file it already imported, so a re-run after a crash
imports the file once. A refused file fails the job with the importer's error, which names the place.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from webapp.jobs.configs import ImportJob
from webapp.jobs.runners.base import JobContext
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

REPORT_EVERY = 200


def run_import(ctx: JobContext) -> dict[str, Any]:
    config: ImportJob = ctx.config  # type: ignore[assignment]
    path = Path(config.path)
    if not path.is_file():
        raise FileNotFoundError(f"{config.file_name or path.name}: the uploaded file is gone (was the job already "
                                "run, or the upload folder cleaned?)")
    project = do_get_or_create_project(config.project)
    ctx.log(f"importing {config.file_name or path.name} ({path.stat().st_size / 1e6:.1f} MB) into {project.name}")
    seen = 0

    def counted(n: int) -> None:
        nonlocal seen
        seen += n
        if seen % REPORT_EVERY == 0:
            ctx.progress(seen, 0, "import")

    result = do_import_file(path, project, fmt=config.format or None, source_model=config.source_model,
                            user=ctx.job.created_by, display_name=config.file_name or path.name, on_progress=counted)
    shutil.rmtree(path.parent, ignore_errors=True)  # the upload's own folder (views save one file per folder)
    batch = result.batch
    if not result.ok:
        raise ValueError(batch.error)
    ctx.progress(batch.n_records, batch.n_records, "import")
    return {"project": project.slug, "import_batch": batch.pk, "added": batch.n_added, "skipped": batch.n_skipped,
            "messages": batch.n_messages, "already_imported": result.already_imported}
