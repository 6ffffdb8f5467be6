"""What each job kind does, given a claimed job: ``RUNNERS[kind](ctx)`` (see ``base.JobContext``)."""

from __future__ import annotations

from webapp.jobs.runners.critique import run_critique
from webapp.jobs.runners.export import run_export
from webapp.jobs.runners.rollout import run_rollout

RUNNERS = {"critique": run_critique, "rollout": run_rollout, "export": run_export}
