"""Large uploads: the file saved by the upload page is imported by a job on the cpu queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webapp.jobs.models import Job
from webapp.jobs.services.lifecycle import check_create_job


def check_queue_import(user, path: Path, file_name: str, options: dict[str, Any]) -> Job:
    """An import job for a file already saved under the upload folder (the upload form's cleaned options)."""
    return check_create_job(user, "import", {"path": str(path), "file_name": file_name,
                                             "project": options["project"], "format": options.get("format") or "",
                                             "source_model": options.get("source_model") or ""})
