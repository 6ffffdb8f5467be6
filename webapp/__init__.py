"""NLAC Studio web application. Importing the Celery app here makes every
``shared_task`` use it (broker from settings) in the web process too."""

from workers.celery_app import app as celery_app

__all__ = ["celery_app"]
