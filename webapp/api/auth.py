"""How an API request proves who it is: a bearer token, else the browser's session.

A token is not sent by the browser on its own, so a token request needs no CSRF token. A session cookie is,
so a session write must carry the CSRF token. ninja's ``django_auth`` runs the CSRF check before it looks at
the session at all, which turned every write without a session (no token, a bogus or a revoked one) into a
403 "CSRF check Failed" instead of the 401 the reads give; ``SessionAuth`` here checks CSRF only for a
request that is in fact logged in.
"""

from __future__ import annotations

from django.conf import settings
from ninja.security import APIKeyCookie, HttpBearer

from webapp.api.tokens import user_for


class TokenAuth(HttpBearer):
    def authenticate(self, request, token: str):
        user = user_for(token)
        if user is not None:
            request.user = user
        return user


class SessionAuth(APIKeyCookie):
    """The logged-in browser (the docs page), CSRF-checked on writes; no session: not this authenticator."""

    param_name: str = settings.SESSION_COOKIE_NAME

    def _get_key(self, request):
        if not request.user.is_authenticated:
            return None  # nothing to protect: the answer is the 401 every unauthenticated request gets
        return super()._get_key(request)  # the CSRF check (Django passes GET, HEAD, OPTIONS)

    def authenticate(self, request, key):
        return request.user if request.user.is_authenticated else None
