from workers.tasks.health import ping
from workers.tasks.jobs import reap_jobs, run_job

__all__ = ["ping", "reap_jobs", "run_job"]
