"""Human corrections of model critiques, and the queues that hand steps to annotators.

An **Annotation** is one person's correction of one critique (or, for a step no model
has critiqued yet, of the step itself). Its content lives in append-only
**Revisions**: a save adds a row whose parent is the revision it was based on and
moves ``Annotation.head`` with a conditional UPDATE, so a stale save changes nothing
and becomes a conflict shown to the user. The model's critique is never changed.

Each annotator keeps their own annotation of a critique, so overlapped queue items
give independent judgments (what agreement measures); reviewers may also save into
an annotator's annotation, which is the "someone else saved in between" case.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

VERDICTS = ("optimal", "suboptimal", "harmful")
OUTCOMES = ("success", "failure")
RATINGS = ("correct", "partly", "wrong")
# The fields a revision carries, in the order the editor shows them.
TEXT_FIELDS = ("predicted_future", "reasoning", "suggestion", "refined_content", "comment")
FIELDS = ("predicted_future", "predicted_outcome", "verdict", "reasoning", "suggestion",
          "refined_content", "refined_tool_calls", "rating", "comment", "skipped", "skip_reason")


class Annotation(models.Model):
    SUBMITTED, ACCEPTED, RETURNED, SKIPPED = "submitted", "accepted", "returned", "skipped"
    STATES = [(s, s) for s in (SUBMITTED, ACCEPTED, RETURNED, SKIPPED)]

    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.CASCADE, related_name="annotations")
    step_index = models.IntegerField()
    critique = models.ForeignKey("jobs.StepCritique", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="annotations")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="annotations")
    head = models.ForeignKey("Revision", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    accepted_revision = models.ForeignKey("Revision", null=True, blank=True, on_delete=models.PROTECT,
                                          related_name="+")  # the gold: only a reviewer's accept sets it
    state = models.CharField(max_length=20, choices=STATES, default=SUBMITTED)
    return_reason = models.TextField(blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)  # soft deletion, restorable
    deleted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["trajectory", "step_index", "id"]
        constraints = [
            models.UniqueConstraint(fields=["critique", "author"], condition=Q(critique__isnull=False),
                                    name="annotation_once_per_critique_author"),
            models.UniqueConstraint(fields=["trajectory", "step_index", "author"], condition=Q(critique__isnull=True),
                                    name="annotation_once_per_bare_step_author"),
        ]
        indexes = [models.Index(fields=["state", "id"], name="annotation_state"),
                   models.Index(fields=["trajectory", "step_index"], name="annotation_step")]

    def __str__(self) -> str:
        return f"annotation {self.pk} of step {self.step_index} of trajectory {self.trajectory_id} by {self.author_id}"


class Revision(models.Model):
    """One save. Immutable: ``save()`` refuses to update an existing row."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    restored_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="revisions")
    created_at = models.DateTimeField(auto_now_add=True)
    queue_item = models.ForeignKey("QueueItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    predicted_future = models.TextField(blank=True)
    predicted_outcome = models.CharField(max_length=20, blank=True)
    verdict = models.CharField(max_length=20, blank=True)
    reasoning = models.TextField(blank=True)
    suggestion = models.TextField(blank=True)
    refined_content = models.TextField(blank=True)
    refined_tool_calls = models.JSONField(default=list, blank=True)  # [{"name": ..., "arguments": {...}}]
    rating = models.CharField(max_length=20, blank=True)
    comment = models.TextField(blank=True)
    skipped = models.BooleanField(default=False)
    skip_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["annotation", "id"]

    def __str__(self) -> str:
        return f"revision {self.pk} of annotation {self.annotation_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("revisions are immutable; save a new one")
        super().save(*args, **kwargs)

    def fields(self) -> dict:
        return {name: getattr(self, name) for name in FIELDS}


class Review(models.Model):
    ACCEPT, RETURN = "accept", "return"

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="reviews")
    revision = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decision = models.CharField(max_length=10, choices=[(ACCEPT, ACCEPT), (RETURN, RETURN)])
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.decision} of annotation {self.annotation_id} by {self.reviewer_id}"


class Draft(models.Model):
    """What a user is typing, kept server-side (debounced) until they save. One per user and target."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="drafts")
    key = models.CharField(max_length=200)  # services.drafts.draft_key: the step, critique and annotation edited
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.CASCADE, related_name="+")
    step_index = models.IntegerField()
    base_revision = models.ForeignKey(Revision, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    fields = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="draft_once_per_user_key")]

    def __str__(self) -> str:
        return f"draft {self.key} of user {self.user_id}"


class Queue(models.Model):
    """A set of steps chosen by a filter, handed out one at a time to its assignees."""

    name = models.CharField(max_length=200)
    project = models.ForeignKey("trajectories.Project", on_delete=models.CASCADE, related_name="queues")
    spec = models.JSONField(default=dict)  # the filter it was built from (services.queues.QueueSpec)
    overlap = models.PositiveIntegerField(default=1)  # how many different annotators see each item
    lease_s = models.PositiveIntegerField(default=600)
    assignees = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="annotation_queues")
    instructions = models.TextField(blank=True)
    n_items = models.IntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name


class QueueItem(models.Model):
    """One step of a queue. ``n_taken`` counts live leases plus finished annotations and never exceeds
    the queue's overlap: every change to it is a conditional UPDATE."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="items")
    position = models.IntegerField()
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.CASCADE, related_name="+")
    step_index = models.IntegerField()
    critique = models.ForeignKey("jobs.StepCritique", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    n_taken = models.IntegerField(default=0)
    n_done = models.IntegerField(default=0)

    class Meta:
        ordering = ["queue", "position"]
        constraints = [models.UniqueConstraint(fields=["queue", "trajectory", "step_index"], name="queue_item_once"),
                       models.CheckConstraint(condition=Q(n_taken__gte=0), name="queue_item_taken_nonnegative")]
        indexes = [models.Index(fields=["queue", "n_taken", "position"], name="queue_item_open")]

    def __str__(self) -> str:
        return f"item {self.position} of queue {self.queue_id}"


class Assignment(models.Model):
    LEASED, DONE, SKIPPED, RETURNED, EXPIRED = "leased", "done", "skipped", "returned", "expired"
    STATUSES = [(s, s) for s in (LEASED, DONE, SKIPPED, RETURNED, EXPIRED)]

    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10, choices=STATUSES, default=LEASED)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    annotation = models.ForeignKey(Annotation, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "annotator"], name="assignment_once_per_annotator")]
        indexes = [models.Index(fields=["annotator", "status"], name="assignment_mine")]

    def __str__(self) -> str:
        return f"{self.status} assignment of item {self.item_id} to {self.annotator_id}"


class Note(models.Model):
    """A human note about a trajectory (or one of its steps), typed in the app or imported from a file."""

    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.CASCADE, related_name="notes")
    step_index = models.IntegerField(null=True, blank=True)
    text = models.TextField()
    author_name = models.CharField(max_length=200, blank=True)  # as the file names them
    source_file = models.CharField(max_length=500, blank=True)
    source_line = models.IntegerField(null=True, blank=True)
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # notes_csv.note_key of (step, author, text): a file imported twice adds nothing ("" = no identity kept).
    content_key = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["trajectory", "step_index", "id"]
        constraints = [models.UniqueConstraint(fields=["trajectory", "content_key"], condition=~Q(content_key=""),
                                               name="note_unique_content")]

    def __str__(self) -> str:
        return f"note {self.pk} on trajectory {self.trajectory_id}"


class AuditEvent(models.Model):
    """Who did what to which annotation, when, with the state before and after."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=50)
    target_type = models.CharField(max_length=50)
    target_id = models.BigIntegerField(null=True)
    trajectory_id = models.BigIntegerField(null=True, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["target_type", "target_id"], name="audit_target")]

    def __str__(self) -> str:
        return f"{self.action} on {self.target_type} {self.target_id} by {self.actor_id}"
