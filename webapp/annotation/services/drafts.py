"""Drafts: what a user typed and has not saved, kept server-side so nothing is lost to a closed
tab, an expired session or a dropped connection. One row per (user, target); saving deletes it."""

from __future__ import annotations

from django.db import transaction

from webapp.annotation.models import FIELDS, Draft

MAX_DRAFT_CHARS = 200_000


@transaction.atomic
def do_keep_draft(user, key: str, trajectory_id: int, step_index: int, fields: dict,
                  base_revision_id: int | None) -> Draft:
    kept = {k: v for k, v in fields.items() if k in FIELDS}
    if sum(len(str(v)) for v in kept.values()) > MAX_DRAFT_CHARS:
        raise ValueError(f"a draft is limited to {MAX_DRAFT_CHARS} characters")
    draft, _ = Draft.objects.update_or_create(
        user=user, key=key,
        defaults={"trajectory_id": trajectory_id, "step_index": step_index, "fields": kept,
                  "base_revision_id": base_revision_id})
    return draft


def draft_for(user, key: str) -> Draft | None:
    return Draft.objects.filter(user=user, key=key).first()
