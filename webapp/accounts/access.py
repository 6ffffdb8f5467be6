"""Who may do what, for accounts-wide questions. Each app has its own access.py
that asks these; views never test group names themselves."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from webapp.accounts.roles import ADMIN, RESEARCHER, roles_of


def has_any_role(user) -> bool:
    """Users without a role (an outsider, a fresh account) see nothing but the login page."""
    return bool(roles_of(user))


def is_researcher(user) -> bool:
    return bool(roles_of(user) & {RESEARCHER, ADMIN})


def require(condition: bool) -> None:
    if not condition:
        raise PermissionDenied
