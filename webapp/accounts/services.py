"""Writes for accounts: the role groups and the demo personas."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from webapp.accounts.roles import ADMIN, ALL_ROLES


@dataclass(frozen=True)
class DemoUser:
    username: str
    password: str
    role: str


DEMO_USERS = (
    DemoUser("annotator", "annotator-demo", "annotator"),
    DemoUser("annotator2", "annotator2-demo", "annotator"),  # the demo queue's second pair of eyes (overlap 2)
    DemoUser("reviewer", "reviewer-demo", "reviewer"),
    DemoUser("researcher", "researcher-demo", "researcher"),
    DemoUser("admin", "admin-demo", "admin"),
)


def ensure_role_groups() -> dict[str, Group]:
    return {name: Group.objects.get_or_create(name=name)[0] for name in ALL_ROLES}


@transaction.atomic
def do_create_user(username: str, password: str, role: str, *, reset_password: bool = False):
    """Create (or find) a user with one role. Existing passwords are kept unless asked."""
    if role not in ALL_ROLES:
        raise ValueError(f"unknown role {role!r}; one of {', '.join(ALL_ROLES)}")
    groups = ensure_role_groups()
    user, created = get_user_model().objects.get_or_create(username=username)
    if created or reset_password:
        user.set_password(password)
    user.is_staff = role == ADMIN
    user.is_superuser = role == ADMIN
    user.save()
    user.groups.add(groups[role])
    return user, created


def do_create_demo_users() -> list[tuple[DemoUser, bool]]:
    return [(demo, do_create_user(demo.username, demo.password, demo.role)[1]) for demo in DEMO_USERS]
