"""A job's life: created and enqueued on commit, claimed by one worker, leased, finished; cancel, retry, reap.

Every state change is a conditional UPDATE on the row, so two workers (or a
worker and the reaper) never both own a job: a claim succeeds only on a queued
row, a lease renews and a finish lands only while the row still names this
worker as its owner. A worker that lost its lease (reaped after a stall) sees
its next renewal fail and stops; the new owner finishes the work.

The broker only rings the bell. A job whose id never reached it (Redis down at
launch) or whose message it lost (a restart without persistence) stays queued
in the row, and the reaper sends it again; a duplicate message is harmless,
since only the conditional claim starts a job.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from kombu.exceptions import OperationalError

from webapp.datasets.models import Snapshot
from webapp.jobs.configs import ConfigError, JobConfig
from webapp.jobs.kinds import job_kind
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.selection import Selection
from workers.celery_app import RUN_JOB
from workers.celery_app import app as celery_app

log = logging.getLogger(__name__)

LOG_TAIL_CHARS = 6000


def lease_seconds() -> int:
    return int(getattr(settings, "NLAC_JOB_LEASE_S", 60))


def max_attempts() -> int:
    return int(getattr(settings, "NLAC_JOB_MAX_ATTEMPTS", 5))


def resend_after_seconds() -> int:
    return int(getattr(settings, "NLAC_JOB_RESEND_AFTER_S", 300))


class BrokerUnavailable(Exception):
    """A launch could not reach the job queue (Redis): the job was withdrawn, nothing runs; try again later."""


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def log_path(job: Job | int) -> Path:
    job_id = job if isinstance(job, int) else job.pk
    return Path(settings.NLAC_JOBS_DIR) / f"job-{job_id}.log"


# -- creating ------------------------------------------------------------------------------------------------


def check_create_job(user, kind: str, config_data: dict[str, Any], selection_data: dict[str, Any] | None = None,
                     parent: Job | None = None) -> Job:
    """Validate a kind, its config and its selection (ConfigError names the bad field), then create."""
    cls = job_kind(kind).config
    config = cls.parse(config_data)
    pinned = getattr(config, "snapshot", None)  # a training job on a dataset snapshot needs no selection
    selection = Selection.parse(selection_data or {}, required=cls.NEEDS_SELECTION and not pinned)
    if pinned is not None:
        _check_snapshot(config)
    checkpoint = None
    if getattr(config, "checkpoint", None) is not None:
        checkpoint = Checkpoint.objects.filter(pk=config.checkpoint).first()
        if checkpoint is None:
            raise ConfigError("checkpoint", f"no checkpoint with id {config.checkpoint}")
    for field in ("target_checkpoint", "critic_checkpoint"):
        other = getattr(config, field, None)
        if other is not None and not Checkpoint.objects.filter(pk=other).exists():
            raise ConfigError(field, f"no checkpoint with id {other}")
    return do_create_job(user, config, selection, checkpoint=checkpoint, parent=parent)


def _check_snapshot(config: JobConfig) -> None:
    """A pinned snapshot must exist, be built, and be of a kind the job can use."""

    snapshot = Snapshot.objects.select_related("dataset").filter(pk=config.snapshot).first()
    if config.KIND in ("build-snapshot",):
        if snapshot is None:
            raise ConfigError("snapshot", f"no snapshot with id {config.snapshot}")
        return
    if snapshot is None or snapshot.status != Snapshot.READY:
        raise ConfigError("snapshot", f"no built snapshot with id {config.snapshot}")
    wanted = job_kind(config.KIND).dataset_kinds
    if wanted and snapshot.dataset.kind not in wanted:
        raise ConfigError("snapshot", f"a {config.KIND} job takes a {' or '.join(w.replace('_', ' ') for w in wanted)}"
                                      f" snapshot; {snapshot.label} holds {snapshot.dataset.get_kind_display()}")


def do_create_job(user, config: JobConfig, selection: Selection, checkpoint: Checkpoint | None = None,
                  parent: Job | None = None) -> Job:
    with transaction.atomic():
        job = Job.objects.create(kind=config.KIND, config=config.to_dict(), config_version=config.VERSION,
                                 selection=selection.to_dict(), queue=config.QUEUE, checkpoint=checkpoint,
                                 parent=parent, created_by=user if getattr(user, "is_authenticated", False) else None)
        log_path(job).unlink(missing_ok=True)  # a database reset reuses ids: never append to an old log
        enqueue(job)
    return job


def check_launch_job(user, kind: str, config_data: dict[str, Any], selection_data: dict[str, Any] | None = None) -> Job:
    """A researcher's launch (page or API): ``check_create_job``, but a job whose id could not be handed to the
    broker is withdrawn and BrokerUnavailable says so, so the answer is "nothing launched, try again" and no
    row is left behind. A row a re-send got through meanwhile (sent, or already claimed) is kept and returned."""
    job = check_create_job(user, kind, config_data, selection_data)
    error = getattr(job, "send_error", "")
    if error and Job.objects.filter(pk=job.pk, status=Job.QUEUED, attempts=0, enqueued_at__isnull=True).delete()[0]:
        log_path(job).unlink(missing_ok=True)
        raise BrokerUnavailable(f"The job queue (the Redis broker) cannot be reached ({error}): no {kind} job was "
                                "launched; try again once it is back.")
    return job


def enqueue(job: Job) -> None:
    """Send the job's id to its queue once the surrounding transaction commits (no task runs against an
    uncommitted row). Never raises for a broker that cannot be reached: ``job.send_error`` says what happened,
    the row stays queued without a send time, and the reaper sends it again."""
    transaction.on_commit(lambda: _send(job))


def _send(job: Job) -> bool:
    queue = getattr(settings, "NLAC_JOB_QUEUES", {}).get(job.queue, job.queue)  # tests route to their own worker
    try:
        celery_app.send_task(RUN_JOB, args=[job.pk], queue=queue)  # by name: webapp never imports the tasks
    except (OperationalError, OSError) as exc:
        job.send_error = str(exc) or type(exc).__name__
        log.warning("job %s: not sent to queue %s: %s", job.pk, queue, job.send_error)
        append_log(job.pk, f"not sent to the job queue ({job.send_error}); the reaper sends it once the queue "
                           "is back")
        return False
    job.send_error = ""
    Job.objects.filter(pk=job.pk).update(enqueued_at=timezone.now())
    return True


# -- owning ----------------------------------------------------------------------------------------------------


def claim(job_id: int, worker: str) -> Job | None:
    """Take a queued job (exactly one row changes) or return None: someone else has it, or it ended."""
    now = timezone.now()
    changed = Job.objects.filter(pk=job_id, status=Job.QUEUED, cancel_requested=False).update(
        status=Job.RUNNING, worker=worker, attempts=F("attempts") + 1, heartbeat_at=now,
        lease_expires_at=now + timedelta(seconds=lease_seconds()), started_at=now, error="", traceback="",
        first_started_at=Coalesce("first_started_at", Value(now, output_field=DateTimeField())))
    if changed != 1:
        _cancel_if_requested(job_id)
        return None
    return Job.objects.get(pk=job_id)


def _cancel_if_requested(job_id: int) -> None:
    Job.objects.filter(pk=job_id, status=Job.QUEUED, cancel_requested=True).update(
        status=Job.CANCELLED, finished_at=timezone.now())


def renew_lease(job_id: int, worker: str) -> bool:
    """Extend the lease; False when the job is no longer this worker's (reaped, or finished elsewhere)."""
    now = timezone.now()
    return Job.objects.filter(pk=job_id, status=Job.RUNNING, worker=worker).update(
        heartbeat_at=now, lease_expires_at=now + timedelta(seconds=lease_seconds())) == 1


def owned(job_id: int, worker: str) -> bool:
    return Job.objects.filter(pk=job_id, status=Job.RUNNING, worker=worker).exists()


def do_update(job_id: int, worker: str, **fields: Any) -> bool:
    """Progress, phase, outputs, metrics, log tail: written only while this worker owns the job."""
    return Job.objects.filter(pk=job_id, status=Job.RUNNING, worker=worker).update(**fields) == 1


def do_finish(job_id: int, worker: str, status: str, error: str = "", tb: str = "",
              outputs: dict[str, Any] | None = None) -> bool:
    if status not in Job.FINISHED:
        raise ValueError(f"not a final status: {status!r}")
    fields: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "lease_expires_at": None,
                              "error": error[:10_000], "traceback": tb[-50_000:]}
    if outputs is not None:
        fields["outputs"] = outputs
    return Job.objects.filter(pk=job_id, status=Job.RUNNING, worker=worker).update(**fields) == 1


def do_wait(job_id: int, worker: str) -> bool:
    """A parent job between phases lets go of its worker: WAITING until its child's end wakes it."""
    return Job.objects.filter(pk=job_id, status=Job.RUNNING, worker=worker).update(
        status=Job.WAITING, worker="", lease_expires_at=None) == 1


def wake_parent(job: Job) -> None:
    """After a child job ended: queue its waiting parent again, which moves to its next phase."""
    if job.parent_id is None:
        return
    with transaction.atomic():
        if Job.objects.filter(pk=job.parent_id, status=Job.WAITING).update(status=Job.QUEUED, enqueued_at=None):
            enqueue(Job.objects.get(pk=job.parent_id))


# -- what researchers do ---------------------------------------------------------------------------------------


def do_request_cancel(job: Job) -> Job:
    """A queued job is cancelled at once; a running one is asked to stop (it checks between chunks)."""
    # The flag first, whatever the status: a claim refuses a flagged row and a running worker stops at the
    # next chunk, so a reap between the two updates cannot slip the job past the cancel.
    Job.objects.filter(pk=job.pk, status__in=(Job.QUEUED, Job.RUNNING, Job.WAITING)).update(cancel_requested=True)
    cancelled_now = Job.objects.filter(pk=job.pk, status__in=(Job.QUEUED, Job.WAITING)).update(
        status=Job.CANCELLED, finished_at=timezone.now())
    for child in job.children.exclude(status__in=Job.FINISHED):
        do_request_cancel(child)
    job.refresh_from_db()
    if cancelled_now:
        wake_parent(job)  # a parent waiting on this child learns it ended
    return job


def do_retry(job: Job) -> Job:
    """A failed or cancelled job runs again; what it finished is kept and skipped. Its failed or cancelled
    children (a parent's shards or phases) run again with it."""
    with transaction.atomic():
        changed = Job.objects.filter(pk=job.pk, status__in=(Job.FAILED, Job.CANCELLED)).update(
            status=Job.QUEUED, cancel_requested=False, worker="", error="", traceback="", finished_at=None,
            enqueued_at=None)
        if changed:
            for child in job.children.filter(status__in=(Job.FAILED, Job.CANCELLED)):
                do_retry(child)
            enqueue(job)
    job.refresh_from_db()
    return job


def do_reap(now=None) -> list[int]:
    """Send again queued jobs whose message may be lost, re-queue running jobs whose lease expired (their
    worker died or hung), wake parents nobody woke; returns the ids sent to the queue."""
    now = now or timezone.now()
    reaped = resend_lost(now)
    stale = Job.objects.filter(status=Job.RUNNING, lease_expires_at__lt=now).only("pk", "queue", "worker", "attempts")
    for job in stale:
        with transaction.atomic():
            mine = Job.objects.filter(pk=job.pk, status=Job.RUNNING, worker=job.worker, lease_expires_at__lt=now)
            if job.attempts >= max_attempts():  # a job that kills its worker every time: stop trying
                if mine.update(status=Job.FAILED, finished_at=now, lease_expires_at=None,
                               error=f"the worker stopped renewing the lease on each of {job.attempts} attempts "
                                     "(killed, out of memory, or hung); retry to run it again"):
                    append_log(job.pk, f"lease of {job.worker} expired after {job.attempts} attempts: failed")
                continue
            if mine.update(status=Job.QUEUED, worker="", lease_expires_at=None, enqueued_at=None):
                append_log(job.pk, f"lease of {job.worker} expired: re-queued by the reaper")
                enqueue(job)
                reaped.append(job.pk)
    # A parent whose child ended while nobody could wake it (the worker died right after finishing the child).
    for parent in Job.objects.filter(status=Job.WAITING).exclude(children__status__in=(Job.QUEUED, Job.RUNNING,
                                                                                       Job.WAITING)):
        with transaction.atomic():
            if Job.objects.filter(pk=parent.pk, status=Job.WAITING).update(status=Job.QUEUED, enqueued_at=None):
                enqueue(parent)
                reaped.append(parent.pk)
    if reaped:
        log.warning("reaped jobs %s", reaped)
    return reaped


def resend_lost(now=None) -> list[int]:
    """Queued jobs never handed to the broker (it was down), or handed over longer than NLAC_JOB_RESEND_AFTER_S
    ago and still not claimed (the message may have died with a Redis restart; a parent's waiting child too):
    sent again. A job that was only waiting its turn gets a duplicate message, which its claim ignores; the
    wait before the next one doubles (it must exceed the time from the job's creation to its last send), so a
    job queued behind hours of work collects a handful of duplicates, not one every few minutes. Stops at
    the first send that fails: the broker is still down, the next round tries again."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=resend_after_seconds())
    resent = []
    lost = Job.objects.filter(Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=cutoff), status=Job.QUEUED)
    for job in lost.only("pk", "queue", "enqueued_at", "created_at").order_by("id"):
        if job.enqueued_at is not None and now - job.enqueued_at < job.enqueued_at - job.created_at:
            continue  # sent again recently relative to how long it has waited: back off
        enqueue(job)
        if getattr(job, "send_error", ""):
            break
        append_log(job.pk, "never reached the job queue: sent by the reaper" if job.enqueued_at is None else
                   f"still queued {int((now - job.enqueued_at).total_seconds())} s after it was sent: sent again "
                   "(a message lost in a broker restart is replaced; a duplicate is ignored)")
        resent.append(job.pk)
    return resent


# -- the log -----------------------------------------------------------------------------------------------------


def append_log(job_id: int, line: str) -> str:
    """Append a timestamped line to the job's log file; returns the file's tail (for ``log_tail``)."""
    path = log_path(job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = timezone.now().strftime("%H:%M:%S")
    with path.open("a", encoding="utf-8") as fh:
        for part in str(line).splitlines() or [""]:
            fh.write(f"{stamp} {part}\n")
    tail = read_log_tail(job_id)
    Job.objects.filter(pk=job_id).update(log_tail=tail)
    return tail


def read_log_tail(job_id: int, chars: int = LOG_TAIL_CHARS) -> str:
    path = log_path(job_id)
    if not path.is_file():
        return ""
    size = path.stat().st_size
    with path.open("rb") as fh:
        fh.seek(max(0, size - chars))
        data = fh.read().decode("utf-8", "replace")
    return data if size <= chars else data.split("\n", 1)[-1]
