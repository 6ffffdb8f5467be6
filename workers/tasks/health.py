"""A health check that goes the whole way: broker -> worker -> Django -> database."""

from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="workers.tasks.health.ping")
def ping() -> dict:
    from webapp.trajectories.models import Project  # lazy, as in jobs.py: tasks load before the app registry

    return {"worker": f"{socket.gethostname()}:{os.getpid()}", "projects": Project.objects.count()}
