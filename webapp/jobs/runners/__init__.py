"""What each job kind does, given a claimed job: ``RUNNERS[kind](ctx)`` (see ``base.JobContext``)."""

from __future__ import annotations

from webapp.jobs.runners.backup import run_backup
from webapp.jobs.runners.critic_data import run_critic_data
from webapp.jobs.runners.critique import run_critique
from webapp.jobs.runners.datasets import run_build_snapshot, run_export_snapshot
from webapp.jobs.runners.evaluate_critic import run_evaluate_critic
from webapp.jobs.runners.export import run_export
from webapp.jobs.runners.imports import run_import
from webapp.jobs.runners.nlac import run_nlac_iteration
from webapp.jobs.runners.outcome import run_calibrate_outcome
from webapp.jobs.runners.refine import run_refine
from webapp.jobs.runners.rollout import run_rollout
from webapp.jobs.runners.supervision import run_replay_critic, run_supervised_rollout
from webapp.jobs.runners.train import run_train_critic

RUNNERS = {"critique": run_critique, "backup": run_backup, "refine": run_refine, "rollout": run_rollout,
           "evaluate": run_rollout, "train-critic": run_train_critic, "distill-policy": run_train_critic,
           "nlac-iteration": run_nlac_iteration, "import": run_import, "export": run_export,
           "build-snapshot": run_build_snapshot, "export-snapshot": run_export_snapshot,
           "evaluate-critic": run_evaluate_critic, "supervised-rollout": run_supervised_rollout,
           "replay-critic": run_replay_critic, "critic-data": run_critic_data,
           "calibrate-outcome": run_calibrate_outcome}
