"""Every job kind, declared once: its config class, its runner, its label, who starts it, its queue, and which
dataset kinds it takes. The runner, the API's internal-kind refusal and the snapshot checks read this table;
adding a kind is one entry here, a config class in ``configs.py`` and a runner module (``tests/webapp/jobs/
test_job_kinds.py`` walks every entry).

Runners are named as ``"module:function"`` and imported when a job runs: runner modules pull in the model
and training stacks, which the web process never needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from types import ModuleType
from typing import Any

from webapp.jobs.configs import (
    BackupJob,
    BuildSnapshotJob,
    CalibrateOutcomeJob,
    ConfigError,
    CriticDataJob,
    CritiqueJob,
    DistillPolicyJob,
    EvaluateCriticJob,
    EvaluateJob,
    ExportJob,
    ExportSnapshotJob,
    ImportJob,
    JobConfig,
    NlacIterationJob,
    RefineJob,
    ReplayCriticJob,
    RolloutJob,
    SupervisedRolloutJob,
    TrainCriticJob,
)

RUNNERS = "webapp.jobs.runners"


@dataclass(frozen=True)
class JobKind:
    config: type[JobConfig]
    runner: str  # "module:function" under webapp.jobs.runners, imported when a job of this kind runs
    label: str
    started_by: str = ""  # where a kind the API does not launch directly is started ("" = POST /api/jobs)
    dataset_kinds: tuple[str, ...] = ()  # the snapshot kinds a job pinned to a snapshot accepts
    trains: bool = False  # trains a checkpoint on a snapshot (the lineage and "train on this" read it)
    launch_page: bool = True  # a launchable kind's form is on the Jobs page (else on the page it starts from)

    @property
    def name(self) -> str:
        return self.config.KIND

    @property
    def queue(self) -> str:
        return self.config.QUEUE

    @property
    def launchable(self) -> bool:
        """Whether users launch it with a config of their own (the launch forms, ``POST /api/jobs``)."""
        return not self.started_by

    def runner_target(self) -> tuple[ModuleType, str]:
        """The runner's module, imported now, and its function's name in it (read at each run)."""
        module, _, function = self.runner.partition(":")
        return import_module(f"{RUNNERS}.{module}"), function

    def run(self, ctx) -> dict[str, Any]:
        module, function = self.runner_target()
        return getattr(module, function)(ctx)


_ENTRIES = (
    JobKind(CritiqueJob, "critique:run_critique", "critique steps"),
    JobKind(BackupJob, "backup:run_backup", "language Bellman backup"),
    JobKind(RefineJob, "refine:run_refine", "refine actions"),
    JobKind(RolloutJob, "rollout:run_rollout", "roll out the policy"),
    JobKind(EvaluateJob, "rollout:run_rollout", "evaluate the policy"),
    JobKind(TrainCriticJob, "train:run_train_critic", "train the critic", trains=True,
            dataset_kinds=("critic_targets", "successor_targets", "runtime_critic")),
    JobKind(DistillPolicyJob, "train:run_train_critic", "distill the policy", trains=True,
            dataset_kinds=("distillation",)),
    JobKind(NlacIterationJob, "nlac:run_nlac_iteration", "NLAC iteration"),
    JobKind(ImportJob, "imports:run_import", "import a file", started_by="POST /api/imports"),
    JobKind(ExportJob, "export:run_export", "export trajectories"),
    JobKind(BuildSnapshotJob, "datasets:run_build_snapshot", "build a dataset snapshot",
            started_by="POST /api/datasets/{id}/build"),
    JobKind(ExportSnapshotJob, "datasets:run_export_snapshot", "export a snapshot",
            started_by="POST /api/snapshots/{id}/exports"),
    JobKind(EvaluateCriticJob, "evaluate_critic:run_evaluate_critic", "evaluate a critic",
            dataset_kinds=("critic_targets", "runtime_critic"), launch_page=False),  # from its snapshot's page
    JobKind(SupervisedRolloutJob, "supervision:run_supervised_rollout", "supervised rollout"),
    JobKind(ReplayCriticJob, "supervision:run_replay_critic", "replay a critic"),
    JobKind(CriticDataJob, "critic_data:run_critic_data", "runtime-critic data"),
    JobKind(CalibrateOutcomeJob, "outcome:run_calibrate_outcome", "calibrate P(success)"),
)

JOB_KINDS: dict[str, JobKind] = {k.name: k for k in _ENTRIES}


def job_kind(kind: str) -> JobKind:
    try:
        return JOB_KINDS[kind]
    except KeyError:
        raise ConfigError("kind", f"unknown job kind {kind!r}; known: {', '.join(JOB_KINDS)}") from None


TRAINING_KINDS = tuple(k.name for k in _ENTRIES if k.trains)


def taking(dataset_kind: str, *, trains: bool) -> str | None:
    """The job kind that trains on (``trains``) or evaluates a snapshot of this dataset kind; None if none does."""
    return next((k.name for k in _ENTRIES if k.trains == trains and dataset_kind in k.dataset_kinds), None)
