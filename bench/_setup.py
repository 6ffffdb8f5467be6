"""Point Django at a benchmark database (never the real one) and set it up."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("NLAC_SHARED_DATA", ROOT.parent / "shared" / "data"))
sys.path.insert(0, str(ROOT))


def django_with(db_url: str | None) -> None:
    if db_url:
        os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", "-v", "0")


def worker_bench(prefix: str, **env: str):
    """A fresh SQLite database, job folder and Celery queue under a temporary directory for a bench that runs
    real workers (their environment inherits this one), with a researcher and the tau-bench airline run
    imported and the embedded model registered. Returns (tmp dir, queue, user, the run's trajectory ids)."""
    import tempfile
    import uuid

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    db_url = f"sqlite:///{tmp / 'bench.sqlite3'}"
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    os.environ.update({"DATABASE_URL": db_url, "NLAC_JOBS_DIR": str(tmp / "jobs"),
                       "NLAC_TRAIN_DIR": str(tmp / "models"), "NLAC_GPU_QUEUE": queue, "NLAC_CPU_QUEUE": queue,
                       **env})
    django_with(db_url)
    from webapp.accounts.services import do_create_user
    from webapp.jobs.services.checkpoints import embedded_checkpoint
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    user = do_create_user("bench", "bench-password-1", "researcher")[0]
    project = do_get_or_create_project("tau-bench airline (bench)")
    assert do_import_file(SHARED / "tau-bench" / "gpt-4o-airline.json", project).ok
    embedded_checkpoint()  # converted and registered before anything is timed
    return tmp, queue, user, list(project.trajectories.order_by("id").values_list("id", flat=True))


def stop_workers(procs, tmp: Path) -> None:
    """End the bench's worker processes (terminate, then kill what does not stop) and remove its folder."""
    import shutil
    import subprocess

    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    shutil.rmtree(tmp, ignore_errors=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
