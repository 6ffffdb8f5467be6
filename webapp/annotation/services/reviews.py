"""Reviewers accept or return annotations. Only an accepted revision is gold."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from webapp.annotation.models import Annotation, Review, Revision
from webapp.annotation.services import audit
from webapp.annotation.services.assignments import do_accept_assignments, do_return_to_author


class StaleReview(Exception):
    """The annotation changed (a newer save) since the reviewer read it; nothing was decided."""


@transaction.atomic
def do_review(reviewer, annotation: Annotation, revision_id: int, decision: str, reason: str = "") -> Review:
    if decision not in (Review.ACCEPT, Review.RETURN):
        raise ValueError(f"unknown decision {decision!r}")
    if decision == Review.RETURN and not reason.strip():
        raise ValueError("say why it is returned")
    if decision == Review.ACCEPT and Revision.objects.filter(pk=revision_id, skipped=True).exists():
        raise ValueError("a skipped step has no correction to accept; return it or leave it")
    changes = {"state": Annotation.ACCEPTED, "accepted_revision_id": revision_id, "return_reason": ""} \
        if decision == Review.ACCEPT else {"state": Annotation.RETURNED, "return_reason": reason.strip()}
    before = {"state": annotation.state, "accepted_revision": annotation.accepted_revision_id}
    moved = Annotation.objects.filter(pk=annotation.pk, head_id=revision_id, deleted_at=None).update(
        **changes, updated_at=timezone.now())
    if moved != 1:
        raise StaleReview(f"annotation {annotation.pk} changed since revision {revision_id}; read it again")
    review = Review.objects.create(annotation=annotation, revision=Revision.objects.get(pk=revision_id),
                                   reviewer=reviewer, decision=decision, reason=reason.strip())
    if decision == Review.RETURN:
        do_return_to_author(annotation)
    else:
        do_accept_assignments(annotation)
    audit.record(reviewer, f"review.{decision}", annotation, before=before,
                 after={"state": changes["state"], "revision": revision_id, "reason": reason.strip()})
    return review


def gold_revisions():
    """The accepted revisions of live annotations: the critic's best targets (datasets use them first)."""
    return Revision.objects.filter(skipped=False, pk__in=Annotation.objects.filter(
        deleted_at=None, accepted_revision__isnull=False).values("accepted_revision_id"))
