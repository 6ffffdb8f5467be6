"""The reaper, once or every N seconds with --loop (instead of Celery beat): re-queue jobs whose lease expired, and
send again queued jobs whose message may be lost. It needs the database, not the broker, to find them."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from webapp.jobs.services.lifecycle import do_reap


class Command(BaseCommand):
    help = ("Re-queue running jobs whose worker stopped renewing their lease, and send again queued jobs that never "
            "reached the broker or stayed unclaimed longer than NLAC_JOB_RESEND_AFTER_S.")

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
                self.stdout.write(f"sent {len(reaped)} job(s) to the queue" + (f": {ids}" if ids else ""))
            if loop is None:
                return
            time.sleep(loop)
