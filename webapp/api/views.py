"""The account's API tokens: list, make (the secret is shown once), revoke."""

from __future__ import annotations

from django.contrib import messages as flash
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from webapp.accounts.access import has_any_role, require
from webapp.api.models import ApiToken
from webapp.api.tokens import do_create_token, do_revoke


@require_http_methods(["GET", "POST"])
def token_list(request):
    require(has_any_role(request.user))
    secret = None
    if request.method == "POST":
        token, secret = do_create_token(request.user, request.POST.get("name", ""))
        flash.success(request, f"Token {token.name!r} made. Copy it now: it is not shown again.")
    tokens = ApiToken.objects.filter(user=request.user).order_by("-id")
    response = render(request, "api/tokens.html", {"tokens": tokens, "secret": secret})
    response["Cache-Control"] = "no-store"  # the secret is on this page once, and in no cache
    return response


@require_POST
def token_revoke(request, pk: int):
    require(has_any_role(request.user))
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    do_revoke(token)
    flash.success(request, f"Token {token.name!r} ({token.prefix}…) revoked.")
    return redirect("token_list")
