"""What the experiment scripts (bench_critic_learning, bench_backup_propagation, bench_corrections_loop) share:
a fresh bench database, jobs run in this process through the product's own runners, the real data imported
through the product's import service, and the success criterion stated before anything runs.

    exp = Experiment("critic-learning", args)      # a fresh var/bench-critic-learning.sqlite3 (or --db)
    exp.criterion("the trained critic's lower 95% bound of AUROC is above 0.5 ...")
    project = exp.import_file(SHARED / "tau-bench" / "gpt-4o-airline.json", "E1 airline")
    out = exp.job("critic-data", {...}, selection={"trajectory_ids": ids})
    exp.result("criterion met", True)             # printed, and kept in the JSON report (--report)
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _setup import ROOT, SHARED, django_with

TAU_GPT4O = SHARED / "tau-bench" / "gpt-4o-airline.json"


def add_common_args(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="a few items, under 5 minutes (the test suite runs it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default=None, help="DATABASE_URL (default: a fresh bench SQLite file)")
    parser.add_argument("--report", default=None, help="write the figures as JSON here")


class Experiment:
    """One run: its database, its jobs, its printed log and its JSON report."""

    def __init__(self, name: str, args) -> None:
        self.name, self.args = name, args
        self.started = time.monotonic()
        self.out: dict[str, Any] = {"experiment": name, "argv": sys.argv[1:], "quick": bool(args.quick),
                                    "seed": args.seed, "jobs": {}}
        if not args.db:
            db = ROOT / "var" / f"bench-{name}{'-quick' if args.quick else ''}.sqlite3"
            db.parent.mkdir(parents=True, exist_ok=True)
            for suffix in ("", "-wal", "-shm"):
                db.with_name(db.name + suffix).unlink(missing_ok=True)
            args.db = f"sqlite:///{db}"
        # trained checkpoints and job logs go to a folder of this run (a temporary one for --quick), emptied
        # first: a fresh database numbers its jobs from 1 again, and a train-critic job resumes from the
        # checkpoints it finds in its folder
        if args.quick:
            scratch = Path(tempfile.mkdtemp(prefix=f"nlac-bench-{name}-"))
            atexit.register(shutil.rmtree, scratch, True)  # a quick run's checkpoints are a gigabyte: not kept
        else:
            scratch = ROOT / "var" / f"bench-{name}"
            shutil.rmtree(scratch, ignore_errors=True)
        os.environ["NLAC_TRAIN_DIR"] = str(scratch / "models")
        os.environ["NLAC_JOBS_DIR"] = str(scratch / "jobs")
        self.scratch = scratch
        django_with(args.db)
        from webapp.jobs.services import lifecycle

        lifecycle.enqueue = lambda job: None  # jobs run here, one after the other; no broker
        self.researcher = _researcher()

    # -- the record of the run ----------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        print(text, flush=True)

    def criterion(self, text: str) -> None:
        """The success criterion, fixed in the script and printed before the run."""
        self.out["criterion"] = text
        self.say(f"criterion (fixed before the run): {text}")

    def result(self, key: str, value: Any) -> None:
        self.out[key] = value

    def finish(self) -> dict[str, Any]:
        self.out["wall_seconds"] = round(time.monotonic() - self.started, 1)
        self.say(f"wall time: {self.out['wall_seconds']:.0f} s")
        if self.args.report:
            Path(self.args.report).write_text(json.dumps(self.out, indent=2, default=str) + "\n", encoding="utf-8")
            self.say(f"wrote {self.args.report}")
        return self.out

    # -- the product ---------------------------------------------------------------------------------------------

    def import_file(self, path: Path, project_name: str):
        from webapp.trajectories.services.imports import do_import_file
        from webapp.trajectories.services.projects import do_get_or_create_project

        if not path.is_file():
            raise SystemExit(f"{path}: not found (../shared/data must sit beside the checkout)")
        project = do_get_or_create_project(project_name)
        result = do_import_file(path, project)
        if not result.ok:
            raise SystemExit(f"import of {path.name} failed: {result}")
        project.refresh_from_db()
        return project

    def job(self, kind: str, config: dict[str, Any], selection: dict[str, Any] | None = None,
            label: str = "") -> dict[str, Any]:
        """Create the job through the product's lifecycle service and run it here; its outputs."""
        from webapp.jobs.models import Job
        from webapp.jobs.runners.base import execute
        from webapp.jobs.services import lifecycle

        job = lifecycle.check_create_job(self.researcher, kind, config, selection)
        started = time.monotonic()
        status = execute(job.pk, "bench:1")
        elapsed = time.monotonic() - started
        job = Job.objects.get(pk=job.pk)
        if status != Job.SUCCEEDED:
            raise SystemExit(f"{label or kind}: job {job.pk} {status}: {job.error}\n{job.traceback}")
        self.say(f"  {label or kind}: job {job.pk}, {elapsed:.0f} s")
        self.out["jobs"][f"{job.pk} {label or kind}"] = round(elapsed, 1)
        return {**(job.outputs or {}), "_job": job.pk}


def _researcher():
    from django.contrib.auth import get_user_model

    from webapp.accounts.services import do_create_user

    existing = get_user_model().objects.filter(username="bench-researcher").first()
    return existing or do_create_user("bench-researcher", "bench-researcher-pw-1", "researcher")[0]


def fmt(value: float | None, spec: str = ".3f") -> str:
    return "undefined" if value is None else format(value, spec)


def interval(values: list[float] | None) -> str:
    return f"[{values[0]:.3f}, {values[1]:.3f}]" if values else "[undefined]"
