"""Jobs, the checkpoints they use and make, and the critiques they write on steps.

A Job row is the truth about a piece of model work: the worker claims it with a
conditional UPDATE, holds a lease it renews while it works, commits results
chunk by chunk, and a re-run (after a crash, a reap or a retry) computes only
what is missing. The broker only carries job ids.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Checkpoint(models.Model):
    """A model directory the jobs can load: the embedded model, or one a training job produced."""

    name = models.CharField(max_length=200, unique=True)
    path = models.CharField(max_length=1000, unique=True)
    base_model = models.CharField(max_length=200, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    produced_by = models.ForeignKey("Job", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="checkpoints")
    dataset_hash = models.CharField(max_length=64, blank=True)
    kind = models.CharField(max_length=50, blank=True)  # policy+critic, critic, policy, base
    # The EMA target network of a checkpoint is its twin: a checkpoint of its own, pointing at the online one.
    ema_of = models.OneToOneField("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="ema_target")
    size_bytes = models.BigIntegerField(default=0)
    manifest = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class Job(models.Model):
    QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
    WAITING = "waiting"  # a parent job between phases: its current child job runs; the child's end wakes it
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, WAITING, SUCCEEDED, FAILED, CANCELLED)]
    FINISHED = (SUCCEEDED, FAILED, CANCELLED)

    kind = models.CharField(max_length=40)
    config = models.JSONField(default=dict)  # validated by the kind's config class (webapp.jobs.configs)
    config_version = models.IntegerField(default=1)
    selection = models.JSONField(default=dict, blank=True)  # what the job works on, as the researcher chose it
    queue = models.CharField(max_length=20, default="gpu")
    status = models.CharField(max_length=20, choices=STATUSES, default=QUEUED)
    cancel_requested = models.BooleanField(default=False)
    progress_done = models.IntegerField(default=0)
    progress_total = models.IntegerField(default=0)
    rate = models.FloatField(null=True, blank=True)  # items per second over the current run
    phase = models.CharField(max_length=100, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    attempts = models.IntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    log_tail = models.TextField(blank=True)  # the last lines; the full log is a file under var/jobs/
    metrics = models.JSONField(default=list, blank=True)  # [{"step": n, "loss": x, ...}, ...]
    outputs = models.JSONField(default=dict, blank=True)  # {"critiques": n, "trajectories": [...], ...}
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)  # the current (last) attempt's start
    # The first attempt's start: a reap or a retry starts the job again, but how long it has been at it is kept.
    first_started_at = models.DateTimeField(null=True, blank=True)
    # When its id was last handed to the broker (null: not yet, or the broker could not be reached). The reaper
    # sends a job again that stayed queued past NLAC_JOB_RESEND_AFTER_S: a message lost in a Redis restart.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["status", "lease_expires_at"], name="job_status_lease"),
            models.Index(fields=["kind", "id"], name="job_kind"),
            models.Index(fields=["created_by", "id"], name="job_creator"),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.kind}, {self.status})"

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def fraction(self) -> float | None:
        return self.progress_done / self.progress_total if self.progress_total else None


def newest_per_step(rows) -> dict[tuple[int, int], Any]:
    """The first row of each (trajectory, step) in ``rows``' order: ordered newest first, the newest per step."""
    out: dict[tuple[int, int], Any] = {}
    for row in rows:
        out.setdefault((row.trajectory_id, row.step_index), row)
    return out


class StepOutputQuerySet(models.QuerySet):
    def newest_per_step(self) -> dict[tuple[int, int], Any]:
        """{(trajectory id, step index): the newest row of that step} among these rows."""
        return newest_per_step(self.order_by("trajectory_id", "step_index", "-id"))


def _of_step(related_name: str) -> tuple[models.ForeignKey, models.ForeignKey]:
    """The trajectory and job a step output belongs to (each table names its reverse accessors)."""
    return (models.ForeignKey("trajectories.Trajectory", on_delete=models.CASCADE, related_name=related_name),
            models.ForeignKey(Job, on_delete=models.CASCADE, related_name=related_name))


class StepOutput(models.Model):
    """What a step job wrote about one agent step (a trajectory and its step number): the columns lists filter on,
    and ``record``, the full ``nlac_core.outputs`` record as JSON (with the provenance of each model call). A
    job writes a step once: each table's unique constraint includes (job, trajectory, step_index)."""

    NOUN = "output"

    step_index = models.IntegerField()
    prompt_id = models.CharField(max_length=100, blank=True)
    record = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StepOutputQuerySet.as_manager()

    class Meta:
        abstract = True
        ordering = ["trajectory", "step_index", "id"]

    def __str__(self) -> str:
        return f"{self.NOUN} of step {self.step_index} of trajectory {self.trajectory_id} (job {self.job_id})"


class StepCritique(StepOutput):
    """A model critique of one agent step, written by a critique (or runtime critic) job.

    ``record`` is the full ``nlac_core.outputs.Critique`` (futures, provenance, raw text). One row per
    (job, step, round). ``mode`` "runtime" rows are a runtime critic's checks (approve = verdict "optimal",
    intervene = "suboptimal"): a supervised step checked in several revision rounds has one row per round, each
    about the proposal of that round (``record.action``).
    """

    NOUN = "critique"

    trajectory, job = _of_step("critiques")
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.SET_NULL)
    verdict = models.CharField(max_length=20, blank=True)
    success_prob = models.FloatField(null=True, blank=True)
    parse_ok = models.BooleanField(default=True)
    mode = models.CharField(max_length=20, blank=True)
    round = models.IntegerField(default=0)  # runtime checks: the revision round of the step

    class Meta(StepOutput.Meta):
        constraints = [models.UniqueConstraint(fields=["job", "trajectory", "step_index", "round"],
                                               name="critique_once_per_job_step_round")]
        indexes = [models.Index(fields=["trajectory", "step_index"], name="critique_step"),
                   models.Index(fields=["verdict", "id"], name="critique_verdict")]


class StepTarget(StepOutput):
    """A language Bellman target for one agent step (the successor's SFT target), written by a backup job.

    ``record`` is the full ``nlac_core.outputs.BellmanTarget`` (next action and future). One row per (job, step).
    """

    NOUN = "Bellman target"

    trajectory, job = _of_step("targets")
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    target_checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.SET_NULL,
                                          related_name="+")
    terminal = models.BooleanField(default=False)
    success_prob = models.FloatField(null=True, blank=True)

    class Meta(StepOutput.Meta):
        constraints = [models.UniqueConstraint(fields=["job", "trajectory", "step_index"],
                                               name="target_once_per_job_step")]
        indexes = [models.Index(fields=["trajectory", "step_index"], name="target_step")]


class StepRefinement(StepOutput):
    """A refined action for one agent step, written by a refine job from the step's critique.

    ``record`` is the full ``nlac_core.outputs.Refinement`` (every round's text, the critique it used);
    ``critique`` is the row it refined from. One row per (job, step).
    """

    NOUN = "refinement"

    trajectory, job = _of_step("refinements")
    critique = models.ForeignKey(StepCritique, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="refinements")
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    valid = models.BooleanField(default=False)
    changed = models.BooleanField(default=False)

    class Meta(StepOutput.Meta):
        constraints = [models.UniqueConstraint(fields=["job", "trajectory", "step_index"],
                                               name="refinement_once_per_job_step")]
        indexes = [models.Index(fields=["trajectory", "step_index"], name="refinement_step")]
