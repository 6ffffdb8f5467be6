"""Running one claimed job: the context a runner gets, and ``execute`` (what the Celery task calls).

A runner reads ``ctx.config`` and ``ctx.selection``, works in chunks, commits
each chunk's results itself, reports with ``ctx.progress`` / ``ctx.log`` /
``ctx.metric``, and asks ``ctx.should_stop()`` between chunks (a cancel, or a
lost lease). It returns the job's outputs. While it runs, a thread renews the
lease; if the row stops naming this worker (reaped after a stall), the next
``should_stop`` says so and nothing more is written.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import Any

from django.db import close_old_connections, connection

from webapp.jobs.configs import JobConfig
from webapp.jobs.kinds import job_kind
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.selection import Selection
from webapp.jobs.services import lifecycle
from webapp.jobs.services.checkpoints import checkpoint_for

log = logging.getLogger(__name__)

MAX_METRIC_POINTS = 5000


class JobLost(Exception):
    """This worker no longer owns the job (its lease expired and another run took over)."""


class WaitForChildren(Exception):
    """A parent job started (or is waiting for) a child job: it waits without holding the worker."""


class JobContext:
    def __init__(self, job: Job, worker: str) -> None:
        self.job = job
        self.worker = worker
        self.config: JobConfig = job_kind(job.kind).config.parse(job.config)
        self.selection = Selection(tuple(job.selection.get("trajectory_ids") or ()), job.selection.get("filter") or {})
        self.metrics: list[dict[str, Any]] = list(job.metrics or [])
        self.cancelled = False
        self.lost = False
        self._started = time.monotonic()
        self._done_at_start: int | None = None
        self._last_check = 0.0

    # -- reporting ------------------------------------------------------------------------------------------

    def log(self, message: str) -> None:
        log.info("job %s: %s", self.job.pk, message)
        lifecycle.append_log(self.job.pk, message)

    def progress(self, done: int, total: int, phase: str | None = None) -> None:
        if self._done_at_start is None:
            self._done_at_start = done
            self._started = time.monotonic()
        elapsed = time.monotonic() - self._started
        rate = (done - self._done_at_start) / elapsed if elapsed > 0 and done > self._done_at_start else None
        fields: dict[str, Any] = {"progress_done": done, "progress_total": total, "rate": rate}
        if phase is not None:
            fields["phase"] = phase
        if not lifecycle.do_update(self.job.pk, self.worker, **fields):
            self._check_owner()

    def metric(self, **point: Any) -> None:
        self.metrics.append(point)
        del self.metrics[:-MAX_METRIC_POINTS]
        lifecycle.do_update(self.job.pk, self.worker, metrics=self.metrics)

    def use_checkpoint(self, checkpoint) -> None:
        """Record the checkpoint the job runs (resolved on the worker: the embedded model is registered there)."""
        if checkpoint is not None and self.job.checkpoint_id != checkpoint.pk:
            lifecycle.do_update(self.job.pk, self.worker, checkpoint=checkpoint)
            self.job.checkpoint = checkpoint

    def model_checkpoint(self, config) -> Checkpoint | None:
        """The checkpoint of the job's model (None for an openai endpoint), resolved and recorded on the job."""
        checkpoint = checkpoint_for(config.checkpoint) if getattr(config, "backend", None) != "openai" else None
        self.use_checkpoint(checkpoint)
        return checkpoint

    def outputs(self, **values: Any) -> None:
        """Outputs known so far (shown while the job runs); the runner's return value is the final word."""
        lifecycle.do_update(self.job.pk, self.worker, outputs=values)

    # -- stopping -------------------------------------------------------------------------------------------

    def should_stop(self, fresh: bool = False) -> bool:
        """True once a cancel was asked for or the lease was lost. The row is read at most once a second
        (callbacks inside training steps and rollout turns ask often), or now with ``fresh`` (between chunks)."""
        if self.cancelled or self.lost:
            return True
        now = time.monotonic()
        if not fresh and now - self._last_check < 1.0:
            return False
        self._last_check = now
        row = Job.objects.filter(pk=self.job.pk).values("status", "worker", "cancel_requested").first()
        if row is None or row["status"] != Job.RUNNING or row["worker"] != self.worker:
            self.lost = True
        elif row["cancel_requested"]:
            self.cancelled = True
        return self.cancelled or self.lost

    def still_owner(self) -> bool:
        """A fresh read of the row (no throttle): does this worker still own the job?"""
        if not self.lost and not lifecycle.owned(self.job.pk, self.worker):
            self.lost = True
        return not self.lost

    def _check_owner(self) -> None:
        if not lifecycle.owned(self.job.pk, self.worker):
            self.lost = True
            raise JobLost(f"job {self.job.pk} is no longer owned by {self.worker}")


class _Heartbeat:
    """Renews the lease every third of its length on a thread of its own (with its own connection)."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"job-{ctx.job.pk}-heartbeat", daemon=True)

    def _run(self) -> None:
        try:
            while not self.stop.wait(max(1.0, lifecycle.lease_seconds() / 3)):
                try:
                    renewed = lifecycle.renew_lease(self.ctx.job.pk, self.ctx.worker)
                except Exception:  # noqa: BLE001 - a locked database or a dropped connection: try again next beat
                    log.exception("job %s: could not renew the lease; trying again", self.ctx.job.pk)
                    connection.close()
                    continue
                if not renewed:
                    self.ctx.lost = True
                    return
        finally:
            connection.close()

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def execute(job_id: int, worker: str | None = None) -> str:
    """Claim and run a job; returns what happened (for the task's result and the tests)."""
    try:
        return _execute(job_id, worker)
    finally:
        if threading.current_thread() is not threading.main_thread():
            connection.close()  # a thread's connection is never reused: do not leave it open on the server


def _execute(job_id: int, worker: str | None) -> str:
    close_old_connections()
    worker = worker or lifecycle.worker_name()
    job = lifecycle.claim(job_id, worker)
    if job is None:
        return "not claimed"
    lifecycle.append_log(job.pk, f"attempt {job.attempts} on {worker}")
    try:
        ctx = JobContext(job, worker)  # a config or selection the code cannot read fails the job, visibly
        with _Heartbeat(ctx):
            outputs = job_kind(job.kind).run(ctx)
    except JobLost:
        return "lost"
    except WaitForChildren as waiting:
        lifecycle.append_log(job.pk, str(waiting))
        if lifecycle.do_wait(job.pk, worker):
            _wake_if_child_already_ended(job.pk)
            return Job.WAITING
        return "lost"
    except Exception as exc:  # noqa: BLE001 - any failure of the work is the job's failure, shown to the user
        tb = traceback.format_exc()
        lifecycle.append_log(job.pk, f"failed: {type(exc).__name__}: {exc}")
        if lifecycle.do_finish(job.pk, worker, Job.FAILED, error=f"{type(exc).__name__}: {exc}", tb=tb):
            lifecycle.wake_parent(job)
        return "failed"
    if ctx.lost:
        return "lost"
    status = Job.CANCELLED if ctx.cancelled else Job.SUCCEEDED
    if not lifecycle.do_finish(job.pk, worker, status, outputs=outputs):
        return "lost"  # reaped while finishing: the run that owns the job now reports
    ctx.log(f"{status}: {outputs}")
    lifecycle.wake_parent(job)
    return status


def _wake_if_child_already_ended(parent_id: int) -> None:
    """The child may have finished before its parent got to WAITING: then nobody else will wake the parent."""
    if not Job.objects.filter(parent_id=parent_id).exclude(status__in=Job.FINISHED).exists():
        child = Job.objects.filter(parent_id=parent_id).order_by("-id").first()
        if child is not None:
            lifecycle.wake_parent(child)
