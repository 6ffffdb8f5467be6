"""The Celery app. Configuration comes from Django settings (CELERY_* names), so the
broker is REDIS_URL everywhere. Queues: ``gpu`` for model work (run with
--concurrency 1 per GPU), ``cpu`` for imports and exports."""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

# the web app sends jobs by this name (``lifecycle._send``), so it never imports the task module (which imports it)
RUN_JOB = "workers.tasks.jobs.run_job"

app = Celery("nlac_studio")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("cpu"), Queue("gpu"))
app.autodiscover_tasks(["workers"], related_name="tasks", force=True)
