"""Demo users, demo data and the demo loop for `make run`: safe and fast to re-run (webapp/demo.py)."""

from django.core.management.base import BaseCommand, CommandError

from webapp import demo


class Command(BaseCommand):
    help = ("Create the demo users, import the demo runs from the shared data folder when it is there, and start "
            "the demo loop (a critique job, a queue, two corrections) unless NLAC_DEMO=0. Refused in production.")

    def handle(self, *args, **options):
        try:
            demo.seed(self.stdout.write)
        except demo.DemoRefused as refused:
            raise CommandError(str(refused)) from None
