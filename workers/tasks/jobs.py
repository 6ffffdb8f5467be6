"""The job tasks: ids in, the work in webapp.jobs (claimed from the row, not trusted to the broker)."""

from __future__ import annotations

from celery import shared_task
from celery.contrib.django.task import DjangoTask

from workers.celery_app import RUN_JOB


@shared_task(base=DjangoTask, name=RUN_JOB, acks_late=True, ignore_result=True)
def run_job(job_id: int) -> str:
    from webapp.jobs.runners.base import execute  # lazy: the worker imports its tasks before Django's app registry

    return execute(job_id)


@shared_task(base=DjangoTask, name="workers.tasks.jobs.reap_jobs", ignore_result=True)
def reap_jobs() -> list[int]:
    """Re-queue jobs whose lease expired and send again queued jobs whose message may be lost; Celery beat runs
    this every NLAC_REAP_EVERY_S seconds."""
    from webapp.jobs.services.lifecycle import do_reap  # lazy, as above

    return do_reap()
