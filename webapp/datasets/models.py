"""Curated datasets: a name, a kind and a filter, built as immutable, versioned snapshots.

A **Snapshot** freezes membership: its **SnapshotRecords** carry the whole record (prompt, completion,
split, source, provenance) as it was at build time, plus links to what it came from (the human revision,
Bellman target, critique or refinement, and the trajectory). Editing a revision later, or deleting a
trajectory, changes nothing in a snapshot; the next build is the next version. Training jobs pin a
snapshot (``config.snapshot``), which is how a checkpoint traces back to the human edits that trained it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.datasets.kinds import KIND_LABELS, KINDS  # declared with each kind (webapp.datasets.kinds)


class Dataset(models.Model):
    name = models.CharField(max_length=150, unique=True)
    kind = models.CharField(max_length=30, choices=[(k, KIND_LABELS[k]) for k in KINDS])
    project = models.ForeignKey("trajectories.Project", on_delete=models.PROTECT, related_name="datasets")
    spec = models.JSONField(default=dict)  # services.specs.DatasetSpec: the step filter and the options
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Snapshot(models.Model):
    BUILDING, READY, FAILED = "building", "ready", "failed"
    STATUSES = [(s, s) for s in (BUILDING, READY, FAILED)]

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="snapshots")
    version = models.IntegerField()
    status = models.CharField(max_length=20, choices=STATUSES, default=BUILDING)
    spec = models.JSONField(default=dict)  # the dataset's spec when this version was built
    n_records = models.IntegerField(default=0)
    content_hash = models.CharField(max_length=64, blank=True)
    card = models.JSONField(default=dict, blank=True)  # filter, counts by source and split, prompt versions
    notes = models.TextField(blank=True)
    error = models.TextField(blank=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["dataset", "-version"]
        constraints = [models.UniqueConstraint(fields=["dataset", "version"], name="snapshot_version_once")]

    def __str__(self) -> str:
        return f"{self.dataset.name} v{self.version}"

    @property
    def label(self) -> str:
        return f"{self.dataset.name} v{self.version}"


class SnapshotRecord(models.Model):
    """One frozen record. Immutable: ``save()`` refuses to update an existing row."""

    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="records")
    position = models.IntegerField()
    split = models.CharField(max_length=20)
    source = models.CharField(max_length=30)  # gold, submitted, bellman, model_critique, refinement, ...
    task_key = models.CharField(max_length=250)
    trajectory = models.ForeignKey("trajectories.Trajectory", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    step_index = models.IntegerField(null=True, blank=True)
    revision = models.ForeignKey("annotation.Revision", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="snapshot_records")
    target = models.ForeignKey("jobs.StepTarget", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    critique = models.ForeignKey("jobs.StepCritique", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    refinement = models.ForeignKey("jobs.StepRefinement", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    prompt_id = models.CharField(max_length=100, blank=True)
    data = models.JSONField()

    class Meta:
        ordering = ["snapshot", "position"]
        constraints = [models.UniqueConstraint(fields=["snapshot", "position"], name="snapshot_record_position")]
        indexes = [models.Index(fields=["snapshot", "split", "position"], name="snapshot_record_split"),
                   models.Index(fields=["revision"], name="snapshot_record_revision")]

    def __str__(self) -> str:
        return f"record {self.position} of snapshot {self.snapshot_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("snapshot records are immutable; build a new version")
        super().save(*args, **kwargs)


class Export(models.Model):
    """A snapshot written in one format by an export job, kept under var/exports/ for download."""

    QUEUED, RUNNING, READY, FAILED = "queued", "running", "ready", "failed"
    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="exports")
    format = models.CharField(max_length=40)
    split = models.CharField(max_length=20, blank=True)  # "" = every split
    status = models.CharField(max_length=20, default=QUEUED)
    path = models.CharField(max_length=1000, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    n_records = models.IntegerField(default=0)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.snapshot} as {self.format}"
