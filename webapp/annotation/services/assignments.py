"""Handing queue items to annotators without ever exceeding a queue's overlap.

``QueueItem.n_taken`` counts live leases plus finished annotations. Taking a slot is
``UPDATE ... SET n_taken = n_taken + 1 WHERE id = ? AND n_taken < overlap``: under any
number of annotators pressing "next" at once, exactly one gets the last slot. A
lease that expires gives its slot back (again a conditional UPDATE on the
assignment first, so a slot is returned once). One assignment per (item,
annotator) is a unique constraint: nobody gets the same item twice.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from webapp.annotation.models import Annotation, Assignment, Queue, QueueItem

CANDIDATES = 25  # open items tried per claim before giving up (others took them meanwhile)


def _lease_end(queue: Queue):
    return timezone.now() + timedelta(seconds=queue.lease_s)


def _take_slot(item_id: int, overlap: int) -> bool:
    return QueueItem.objects.filter(pk=item_id, n_taken__lt=overlap).update(n_taken=F("n_taken") + 1) == 1


def _give_slot_back(item_id: int) -> None:
    QueueItem.objects.filter(pk=item_id, n_taken__gt=0).update(n_taken=F("n_taken") - 1)


def do_expire_leases(queue: Queue) -> int:
    """Give back the slots of leases that ran out. Each is released once, whoever calls this."""
    released = 0
    stale = Assignment.objects.filter(item__queue=queue, status=Assignment.LEASED,
                                      lease_expires_at__lt=timezone.now()).values_list("pk", "item_id")
    for pk, item_id in list(stale[:500]):
        with transaction.atomic():
            if Assignment.objects.filter(pk=pk, status=Assignment.LEASED,
                                         lease_expires_at__lt=timezone.now()).update(status=Assignment.EXPIRED) == 1:
                _give_slot_back(item_id)
                released += 1
    return released


def do_claim_next(queue: Queue, annotator) -> Assignment | None:
    """The annotator's current item: a live lease, else an item returned to them by a reviewer, else
    the first open item they have not seen. None when the queue has nothing left for them."""
    mine = Assignment.objects.filter(item__queue=queue, annotator=annotator).select_related("item")
    current = mine.filter(status=Assignment.LEASED, lease_expires_at__gte=timezone.now()).order_by("item__position")
    if (found := current.first()) is not None:
        return found
    returned = mine.filter(status=Assignment.RETURNED).order_by("item__position").first()
    if returned is not None:
        Assignment.objects.filter(pk=returned.pk).update(lease_expires_at=_lease_end(queue))
        return returned
    do_expire_leases(queue)
    for expired in mine.filter(status=Assignment.EXPIRED).order_by("item__position"):
        with transaction.atomic():
            if _take_slot(expired.item_id, queue.overlap) and Assignment.objects.filter(
                    pk=expired.pk, status=Assignment.EXPIRED).update(
                    status=Assignment.LEASED, lease_expires_at=_lease_end(queue)) == 1:
                expired.refresh_from_db()
                return expired
            transaction.set_rollback(True)
    seen = Assignment.objects.filter(annotator=annotator, item__queue=queue).values("item_id")
    while True:
        candidates = list(QueueItem.objects.filter(queue=queue, n_taken__lt=queue.overlap)
                          .exclude(pk__in=seen).order_by("position").values_list("pk", flat=True)[:CANDIDATES])
        if not candidates:
            return None
        for item_id in candidates:
            try:
                with transaction.atomic():
                    if not _take_slot(item_id, queue.overlap):
                        continue
                    return Assignment.objects.create(item_id=item_id, annotator=annotator,
                                                     lease_expires_at=_lease_end(queue))
            except IntegrityError:  # the same annotator claimed it in another tab at this instant
                continue


@transaction.atomic
def do_finish_assignment(item: QueueItem, annotator, annotation: Annotation, status: str) -> bool:
    """Mark the annotator's assignment done (or skipped) after a save. A skip gives the slot back for
    someone else. If the lease had expired, the save still stands but counts only if a slot is free.
    Returns whether the save counts for the queue."""
    # Locked (PostgreSQL) so that a concurrent expiry cannot hand the slot away between this read
    # and the write below; on SQLite the IMMEDIATE transaction already serialises writers.
    assignment = Assignment.objects.select_for_update().filter(item=item, annotator=annotator).first()
    if assignment is None:
        if not item.queue.assignees.filter(pk=annotator.pk).exists():
            return False  # a reviewer or researcher saving from a queue link: not the queue's work
        if not _take_slot(item.pk, item.queue.overlap):
            return False
        try:
            with transaction.atomic():
                assignment = Assignment.objects.create(item=item, annotator=annotator)
        except IntegrityError:
            _give_slot_back(item.pk)
            assignment = Assignment.objects.get(item=item, annotator=annotator)
    if assignment.status == Assignment.EXPIRED and not _take_slot(item.pk, item.queue.overlap):
        return False
    was_done = assignment.status == Assignment.DONE
    if assignment.status == Assignment.SKIPPED and status == Assignment.DONE and not _take_slot(
            item.pk, item.queue.overlap):
        return False
    Assignment.objects.filter(pk=assignment.pk).update(status=status, annotation=annotation,
                                                       finished_at=timezone.now(), lease_expires_at=None)
    if status == Assignment.DONE and not was_done:
        QueueItem.objects.filter(pk=item.pk).update(n_done=F("n_done") + 1)
    if status == Assignment.SKIPPED and assignment.status != Assignment.SKIPPED:
        _give_slot_back(item.pk)
        if was_done:
            QueueItem.objects.filter(pk=item.pk, n_done__gt=0).update(n_done=F("n_done") - 1)
    return True


@transaction.atomic
def do_reopen_assignment(item: QueueItem, annotator) -> None:
    """An undone first save: the item is the annotator's to work on again (their slot stays taken)."""
    if Assignment.objects.filter(item=item, annotator=annotator, status=Assignment.DONE).update(
            status=Assignment.LEASED, lease_expires_at=_lease_end(item.queue), finished_at=None) == 1:
        QueueItem.objects.filter(pk=item.pk, n_done__gt=0).update(n_done=F("n_done") - 1)


@transaction.atomic
def do_accept_assignments(annotation: Annotation) -> None:
    """An accepted annotation that had been returned counts as done again."""
    for assignment in Assignment.objects.filter(annotation=annotation, status=Assignment.RETURNED):
        if Assignment.objects.filter(pk=assignment.pk, status=Assignment.RETURNED).update(
                status=Assignment.DONE, finished_at=timezone.now(), lease_expires_at=None) == 1:
            QueueItem.objects.filter(pk=assignment.item_id).update(n_done=F("n_done") + 1)


@transaction.atomic
def do_return_to_author(annotation: Annotation) -> None:
    """A reviewer returned the annotation: its queue items come back to the author first."""
    for assignment in Assignment.objects.filter(annotation=annotation, annotator=annotation.author,
                                                status=Assignment.DONE):
        if Assignment.objects.filter(pk=assignment.pk, status=Assignment.DONE).update(
                status=Assignment.RETURNED, finished_at=None) == 1:
            QueueItem.objects.filter(pk=assignment.item_id, n_done__gt=0).update(n_done=F("n_done") - 1)
