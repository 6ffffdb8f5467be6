"""An uploaded file (the import page, the API): saved under the upload folder, then imported in the request
when small, or by a cpu job when large. The saved copy is removed once imported in the request."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.text import get_valid_filename

from webapp.jobs.services.imports import check_queue_import
from webapp.trajectories.models import Project
from webapp.trajectories.services.imports import ImportResult, do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project


@dataclass(frozen=True)
class Received:
    project: Project | None = None
    result: ImportResult | None = None
    job: Any = None  # the import job, for a large file


def do_receive_upload(user, upload, options: dict[str, Any]) -> Received:
    """``options`` are the upload form's cleaned data (project, format, source_model)."""
    folder = settings.UPLOAD_DIR / uuid.uuid4().hex
    folder.mkdir(parents=True)
    path = folder / (get_valid_filename(upload.name) or "upload")
    try:
        with open(path, "wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if upload.size > settings.NLAC_IMPORT_IN_REQUEST_BYTES:  # large: a cpu job imports it
        return Received(job=check_queue_import(user, path, upload.name, options))
    try:
        project = do_get_or_create_project(options["project"])
        result = do_import_file(path, project, fmt=options.get("format") or None,
                                source_model=options.get("source_model") or "", user=user, display_name=upload.name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return Received(project=project, result=result)
