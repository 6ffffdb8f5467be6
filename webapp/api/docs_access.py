"""Who may read the API's schema and docs: /api/openapi.json and /api/docs list every operation, its
parameters and its error texts, a map of the service that strangers have no need of. Both need a login;
the schema also answers a Bearer token (scripts and API clients read it that way). A stranger's browser is
sent to the login page; a stranger's client gets 401 JSON, like the rest of the API.

The docs page is django-ninja's Swagger UI, served from ninja's static files with no inline script, so it
passes the site's Content-Security-Policy unchanged.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse
from ninja.openapi.views import openapi_view

from webapp.api.tokens import user_for


def _user(request):
    if request.user.is_authenticated:
        return request.user
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():

        return user_for(token.strip())
    return None


def docs_login_required(view):
    """NinjaAPI(docs_decorator=...): wraps both the schema view and the docs page view."""
    is_page = getattr(view, "func", None) is openapi_view

    @wraps(view)
    def guarded(request, *args, **kwargs):
        if is_page and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_page and _user(request) is None:
            return JsonResponse({"detail": "log in, or send Authorization: Bearer <token>, to read the API schema",
                                 "field": None}, status=401, headers={"WWW-Authenticate": "Bearer"})
        return view(request, *args, **kwargs)

    return guarded
