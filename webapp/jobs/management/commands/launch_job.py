"""Launch a job from the shell, as a researcher would from the Jobs page or ``POST /api/jobs``:

    python manage.py launch_job critique --user alice --trajectory-ids 12,15 --k 2 --temperature 0.7
    python manage.py launch_job KIND --help     # the kind's settings, with their defaults, ranges and choices

The options are the kind's config fields (``webapp.jobs.configs``), derived from their declared types, defaults,
ranges, choices and help; the same service as the page and the API checks and creates the job.
"""

from __future__ import annotations

import argparse
from typing import Any, Literal, get_args, get_origin

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from webapp.jobs import access
from webapp.jobs.configs import MAX_ID, ConfigError, JobConfig, bound
from webapp.jobs.form_fields import field_type
from webapp.jobs.kinds import JOB_KINDS
from webapp.jobs.services import lifecycle

LAUNCHABLE = [name for name, kind in JOB_KINDS.items() if kind.launchable]


def _none_or(cast):
    def parse(text: str):
        return None if text.lower() in ("none", "") else cast(text)
    return parse


def add_config_options(parser: argparse.ArgumentParser, config: type[JobConfig]) -> None:
    """One ``--name`` option per config field; what is not given takes the config's default."""
    group = parser.add_argument_group(f"{config.KIND} settings")
    for name, info in config.model_fields.items():
        if name in config.INTERNAL:
            continue
        kind, nullable = field_type(info.annotation)
        flag = "--" + name.replace("_", "-")
        low, high = bound(config, name, "ge"), bound(config, name, "le")
        limits = [f">= {low}" if low is not None else "", f"<= {high}" if high is not None and high < MAX_ID else ""]
        default = "required" if info.is_required() else f"default {info.default!r}"
        text = "; ".join(p for p in (info.title or "", info.description or "", default, " ".join(filter(None, limits)),
                                     "none: unset" if nullable else "") if p)
        options: dict[str, Any] = {"dest": f"config_{name}", "default": argparse.SUPPRESS, "help": text}
        if kind is not bool and get_origin(kind) is not Literal:
            options["metavar"] = name.upper()
        if kind is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, **options)
        elif get_origin(kind) is Literal:
            group.add_argument(flag, choices=list(get_args(kind)), **options)
        elif kind in (int, float):
            group.add_argument(flag, type=_none_or(kind) if nullable else kind, **options)
        else:
            group.add_argument(flag, type=str, **options)


class Command(BaseCommand):
    help = "Launch a job of any kind users launch, with its settings as options (KIND --help lists them)."

    def add_arguments(self, parser) -> None:
        kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND",
                                      help=f"one of {', '.join(LAUNCHABLE)}")
        for name in LAUNCHABLE:
            sub = kinds.add_parser(name, help=JOB_KINDS[name].label, description=JOB_KINDS[name].config.__doc__)
            sub.add_argument("--user", required=True, help="the researcher the job is launched as")
            sub.add_argument("--trajectory-ids", default="", help="comma-separated ids (kinds that take a selection)")
            add_config_options(sub, JOB_KINDS[name].config)

    def handle(self, *args, kind: str, user: str, trajectory_ids: str, **options) -> None:
        config_class = JOB_KINDS[kind].config
        given = {k.removeprefix("config_"): v for k, v in options.items() if k.startswith("config_")}
        unknown = sorted(set(given) - set(config_class.model_fields))
        if unknown:
            raise CommandError(f"--{unknown[0].replace('_', '-')}: not a setting of a {kind} job")
        try:
            account = get_user_model().objects.get(username=user)
            access.require_jobs(account)
        except get_user_model().DoesNotExist:
            raise CommandError(f"--user: no account {user!r}") from None
        except PermissionDenied:
            raise CommandError(f"--user: {user} may not run jobs (a researcher or an admin may)") from None
        try:
            ids = [int(part) for part in trajectory_ids.replace(" ", ",").split(",") if part.strip()]
        except ValueError:
            raise CommandError("--trajectory-ids: expected ids separated by commas, like 12,15,40") from None
        try:
            job = lifecycle.check_launch_job(account, kind, given, {"trajectory_ids": ids} if ids else {})
        except ConfigError as exc:
            raise CommandError(f"--{exc.field.replace('_', '-')}: {exc.message}") from None
        except lifecycle.BrokerUnavailable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"job {job.pk} ({kind}) queued on {job.queue}")
