"""Celery workers: thin tasks that take ids and call nlac_core / webapp services."""
