"""Making, checking and revoking API tokens (the only writes of this app)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.utils import timezone

from webapp.api.models import ApiToken

PREFIX = "nlac_"
TOUCH_EVERY = timedelta(minutes=1)


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def do_create_token(user, name: str) -> tuple[ApiToken, str]:
    """A new token and its secret, which is never stored and cannot be shown again."""
    name = (name or "").strip()[:100] or "token"
    raw = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:12], key_hash=_hash(raw))
    return token, raw


def do_revoke(token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk, revoked_at=None).update(revoked_at=timezone.now())


def user_for(raw: str):
    """The active user of a live token, or None."""
    if not raw or not raw.startswith(PREFIX) or len(raw) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=_hash(raw), revoked_at=None).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > TOUCH_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user
