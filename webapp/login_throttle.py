"""The client address django-axes counts failed logins against (settings.AXES_CLIENT_IP_CALLABLE).

Behind a TLS-terminating proxy (NLAC_BEHIND_TLS_PROXY=1) REMOTE_ADDR is the proxy's own address, so every
client would share one count. The proxy appends the address it saw to X-Forwarded-For; only that last entry
is trusted, because whatever comes before it is what the client chose to send, and only when the request came
from a proxy the admin listed (NLAC_TRUSTED_PROXIES): a client that reaches gunicorn directly could otherwise
send a new X-Forwarded-For with every attempt and never be locked out.
"""

from __future__ import annotations

from axes.helpers import get_client_username, get_cool_off
from django.conf import settings
from django.shortcuts import render


def client_ip(request) -> str | None:
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None) and \
            request.META.get("REMOTE_ADDR") in settings.NLAC_TRUSTED_PROXIES:
        forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
        if forwarded:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR")


def lockout_response(request, original_response=None, credentials=None):
    """The page a locked-out login gets (429): who is locked, for how long, and how an admin lifts it."""
    cool_off = get_cool_off(request)
    context = {
        "username": get_client_username(request, credentials) or "",
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cooloff_minutes": round(cool_off.total_seconds() / 60) if cool_off else None,
    }
    return render(request, "accounts/locked_out.html", context, status=429)
