"""The audit log: one row per annotation action, written in the same transaction as the action."""

from __future__ import annotations

from typing import Any

from webapp.annotation.models import AuditEvent


def record(actor, action: str, target, *, before: Any = None, after: Any = None, trajectory_id=None) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "is_authenticated", False) else None, action=action,
        target_type=type(target).__name__.lower(), target_id=target.pk,
        trajectory_id=trajectory_id if trajectory_id is not None else getattr(target, "trajectory_id", None),
        before=before, after=after)
