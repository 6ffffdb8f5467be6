"""Test settings: the real settings, with a fast password hasher, and (on SQLite)
a test database in a file, so that a real Celery worker process and the live
server can see what a test wrote."""

import os
import tempfile
from pathlib import Path

from webapp.settings import *  # noqa: F403
from webapp.settings import DATABASES, VAR_DIR

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
UPLOAD_MAX_BYTES = 2 * 1024 * 1024
# Job logs and exports of a test session go to a folder of its own, never into var/jobs of `make run`.
NLAC_JOBS_DIR = Path(os.environ.get("NLAC_TEST_JOBS_DIR") or tempfile.mkdtemp(prefix="nlac-test-jobs-"))
NLAC_TRAIN_DIR = NLAC_JOBS_DIR / "models"  # checkpoints trained by test jobs (the embedded model stays in var/)
