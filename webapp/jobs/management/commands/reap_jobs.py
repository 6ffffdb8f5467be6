"""Re-queue jobs whose lease expired: once, or every N seconds with --loop (instead of Celery beat)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from webapp.jobs.services.lifecycle import do_reap


class Command(BaseCommand):
    help = "Re-queue running jobs whose worker stopped renewing their lease."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--loop", type=float, default=None, metavar="SECONDS",
                            help="keep reaping every SECONDS until interrupted")

    def handle(self, *args, loop: float | None = None, **options) -> None:
        if loop is not None and loop <= 0:
            raise CommandError("--loop must be a positive number of seconds")
        while True:
            reaped = do_reap()
            if reaped or loop is None:
                ids = ", ".join(map(str, reaped))
                self.stdout.write(f"re-queued {len(reaped)} job(s)" + (f": {ids}" if ids else ""))
            if loop is None:
                return
            time.sleep(loop)
