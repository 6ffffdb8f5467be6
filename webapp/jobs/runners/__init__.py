"""What each job kind does, given a claimed job: ``RUNNERS[kind](ctx)`` (see ``base.JobContext``)."""

from __future__ import annotations

from webapp.jobs.runners.backup import run_backup
from webapp.jobs.runners.critique import run_critique
from webapp.jobs.runners.export import run_export
from webapp.jobs.runners.rollout import run_rollout
from webapp.jobs.runners.train import run_train_critic

RUNNERS = {"critique": run_critique, "backup": run_backup, "rollout": run_rollout, "evaluate": run_rollout,
           "train-critic": run_train_critic, "export": run_export}
