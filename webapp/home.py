"""What the home page shows each role first (read-only): an annotator their queues with what is left for them, a
reviewer what waits for review and how much the annotators agree, a researcher their jobs, datasets, checkpoints
and the next actions. A user with several roles sees each part; every part has an empty state saying how to
fill it."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from webapp.accounts.access import is_researcher
from webapp.accounts.roles import ANNOTATOR, roles_of
from webapp.annotation import agreement
from webapp.annotation.access import can_review
from webapp.annotation.models import Annotation, Assignment, Queue, QueueItem
from webapp.datasets.models import Dataset
from webapp.jobs.models import Checkpoint, Job, StepCritique

MAX_QUEUES = 20
RECENT = 5


@dataclass(frozen=True)
class QueueStanding:
    """One of an annotator's queues, from their side."""

    queue: Queue
    remaining: int  # items they can still take: open ones they have not seen, their live leases, returned ones
    done: int  # finished (saved or skipped) by them
    returned: int  # sent back to them by a reviewer
    critiqued: int  # items whose step has a model critique by now

    @property
    def total(self) -> int:
        return self.queue.n_items

    @property
    def uncritiqued(self) -> int:
        return self.total - self.critiqued


def queue_standing(queue: Queue, user) -> QueueStanding:
    mine = Assignment.objects.filter(item__queue=queue, annotator=user)
    done = mine.filter(status__in=(Assignment.DONE, Assignment.SKIPPED)).count()
    returned = mine.filter(status=Assignment.RETURNED).count()
    leased = mine.filter(status=Assignment.LEASED, lease_expires_at__gte=timezone.now()).count()
    unseen = (QueueItem.objects.filter(queue=queue, n_taken__lt=queue.overlap)
              .exclude(pk__in=mine.values("item_id")).count())
    critique = StepCritique.objects.filter(trajectory=OuterRef("trajectory"), step_index=OuterRef("step_index"))
    critiqued = QueueItem.objects.filter(queue=queue).filter(Exists(critique)).count()
    return QueueStanding(queue, unseen + leased + returned, done, returned, critiqued)


def annotator_part(user) -> dict | None:
    if ANNOTATOR not in roles_of(user):
        return None
    queues = Queue.objects.filter(assignees=user).select_related("project").order_by("-id")[:MAX_QUEUES]
    return {"queues": [queue_standing(q, user) for q in queues]}


def reviewer_part(user) -> dict | None:
    if not can_review(user):
        return None
    waiting = (Annotation.objects.filter(state=Annotation.SUBMITTED, deleted_at=None, head__isnull=False)
               .select_related("author", "head", "critique"))
    overlapped = Queue.objects.filter(overlap__gt=1).select_related("project").order_by("-id")[:RECENT]
    return {"n_waiting": waiting.count(), "waiting": list(waiting.order_by("updated_at")[:RECENT]),
            "n_accepted": Annotation.objects.filter(state=Annotation.ACCEPTED, deleted_at=None).count(),
            "agreement": [(q, agreement.for_queue(q)) for q in overlapped]}


def researcher_part(user) -> dict | None:
    if not is_researcher(user):
        return None
    active = Q(status__in=(Job.QUEUED, Job.RUNNING, Job.WAITING))
    jobs = Job.objects.filter(parent=None).select_related("created_by")
    return {"running": list(jobs.filter(active).order_by("-id")[:RECENT]),
            "recent": list(jobs.exclude(active).order_by("-id")[:RECENT]),
            "datasets": list(Dataset.objects.select_related("project").order_by("-created_at", "-id")[:RECENT]),
            "checkpoints": list(Checkpoint.objects.order_by("-created_at", "-id")[:RECENT])}


def context(user) -> dict:
    return {"annotator": annotator_part(user), "reviewer": reviewer_part(user), "researcher": researcher_part(user)}
