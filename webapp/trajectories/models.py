"""Stored trajectories. Typed records live in nlac_core.records; ``convert.py`` is
the one boundary between them and these rows.

List pages read only the indexed summary columns of Trajectory (reward, success,
counts, preview); message bodies live in Message and are read by the detail page.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Project(models.Model):
    """A domain of tasks: tau-bench airline, 20 Questions, MATH..."""

    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(max_length=200, unique=True)
    domain = models.CharField(max_length=100, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Cached aggregates, refreshed by services.summary after every import.
    n_trajectories = models.IntegerField(default=0)
    n_tasks = models.IntegerField(default=0)
    n_messages = models.BigIntegerField(default=0)
    mean_reward = models.FloatField(null=True, blank=True)
    pass_hat_k = models.JSONField(default=dict, blank=True)
    facets = models.JSONField(default=dict, blank=True)  # filter choices: {"source_model": [...], ...}

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    external_id = models.CharField(max_length=200)
    instruction = models.TextField(blank=True)
    gold_actions = models.JSONField(default=list, blank=True)
    gold_outputs = models.JSONField(default=list, blank=True)
    gold_answer = models.TextField(null=True, blank=True)
    split = models.CharField(max_length=50, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "external_id", "content_hash"],
                                               name="task_unique_content")]
        ordering = ["project", "id"]

    def __str__(self) -> str:
        return f"{self.project.name} task {self.external_id}"


class ImportBatch(models.Model):
    """One import of one file: the audit trail, and the fast path for re-imports."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="imports")
    file_name = models.CharField(max_length=500)
    file_sha256 = models.CharField(max_length=64, db_index=True)
    file_size = models.BigIntegerField(default=0)
    format = models.CharField(max_length=50, blank=True)
    requested_format = models.CharField(max_length=50, blank=True)  # the --format asked for, "" = detect
    source_model = models.CharField(max_length=200, blank=True)  # the --source-model asked for
    status = models.CharField(max_length=20, choices=[(SUCCEEDED, SUCCEEDED), (FAILED, FAILED)])
    n_records = models.IntegerField(default=0)
    n_added = models.IntegerField(default=0)
    n_skipped = models.IntegerField(default=0)
    n_tasks = models.IntegerField(default=0)
    n_messages = models.IntegerField(default=0)
    error = models.TextField(blank=True)
    duration_s = models.FloatField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.file_name} -> {self.project.name} ({self.status})"


class Trajectory(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="trajectories")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="trajectories")
    trial = models.IntegerField(default=0)
    source_model = models.CharField(max_length=200, blank=True)
    source_model_from_file_name = models.BooleanField(default=False)  # a label only: not in the content hash
    source_checkpoint = models.CharField(max_length=500, blank=True)
    user_model = models.CharField(max_length=200, blank=True)
    reward = models.FloatField(null=True, blank=True)
    success = models.BooleanField(default=False)
    reward_info = models.JSONField(null=True, blank=True)
    termination_reason = models.CharField(max_length=100, blank=True)
    error = models.TextField(blank=True)
    cost = models.FloatField(null=True, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    external_id = models.CharField(max_length=200, blank=True, db_index=True)
    policy = models.TextField(blank=True)
    meta = models.JSONField(default=dict, blank=True)
    # Provenance and identity.
    content_hash = models.CharField(max_length=64)
    source_format = models.CharField(max_length=50, blank=True)
    imported_from = models.CharField(max_length=500, blank=True)
    record_index = models.IntegerField(null=True, blank=True)
    import_batch = models.ForeignKey(ImportBatch, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    # Denormalised summary, so that list pages never touch messages.
    n_messages = models.IntegerField(default=0)
    n_steps = models.IntegerField(default=0)
    preview = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "content_hash"], name="trajectory_unique_hash")]
        indexes = [
            models.Index(fields=["project", "id"], name="traj_project_id"),
            models.Index(fields=["project", "success", "id"], name="traj_project_success"),
            models.Index(fields=["project", "reward", "id"], name="traj_project_reward"),
            models.Index(fields=["project", "n_messages", "id"], name="traj_project_length"),
            models.Index(fields=["project", "source_model", "id"], name="traj_project_source"),
            models.Index(fields=["project", "termination_reason", "id"], name="traj_project_termination"),
            models.Index(fields=["task", "id"], name="traj_task_id"),
            models.Index(fields=["success", "id"], name="traj_success"),
            models.Index(fields=["source_model", "id"], name="traj_source"),
            models.Index(fields=["termination_reason", "id"], name="traj_termination"),
            models.Index(fields=["reward", "id"], name="traj_reward"),
            models.Index(fields=["n_messages", "id"], name="traj_length"),
        ]

    def __str__(self) -> str:
        return f"trajectory {self.pk} ({self.project.name}, task {self.task.external_id}, trial {self.trial})"


class Message(models.Model):
    """One message of a trajectory. An assistant message is an **agent step**:
    ``step_index`` numbers them 0, 1, ... within the trajectory, and
    (trajectory.content_hash, step_index) is the step's stable identity
    (``nlac_core.records.step_uid``) that critiques and refinements attach to."""

    # No index of its own: message_unique_position (trajectory, position) leads with it.
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="messages", db_index=False)
    position = models.IntegerField()
    role = models.CharField(max_length=20)
    content = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=200, null=True, blank=True)
    name = models.CharField(max_length=200, null=True, blank=True)
    requestor = models.CharField(max_length=20, null=True, blank=True)
    turn_idx = models.IntegerField(null=True, blank=True)
    step_index = models.IntegerField(null=True, blank=True)
    meta = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["trajectory", "position"]
        constraints = [
            models.UniqueConstraint(fields=["trajectory", "position"], name="message_unique_position"),
            models.UniqueConstraint(fields=["trajectory", "step_index"], condition=Q(step_index__isnull=False),
                                    name="message_unique_step"),
        ]

    def __str__(self) -> str:
        return f"message {self.position} ({self.role}) of trajectory {self.trajectory_id}"

    @property
    def is_step(self) -> bool:
        return self.step_index is not None
