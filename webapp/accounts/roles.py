"""The four roles, as Django groups. What each may do is decided in access.py."""

from __future__ import annotations

ANNOTATOR = "annotator"
REVIEWER = "reviewer"
RESEARCHER = "researcher"
ADMIN = "admin"
ALL_ROLES = (ANNOTATOR, REVIEWER, RESEARCHER, ADMIN)


def roles_of(user) -> frozenset[str]:
    """The user's roles, read once per request and cached on the user object."""
    if not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_nlac_roles", None)
    if cached is None:
        cached = frozenset(user.groups.filter(name__in=ALL_ROLES).values_list("name", flat=True))
        if user.is_superuser:
            cached = cached | {ADMIN}
        user._nlac_roles = cached
    return cached
