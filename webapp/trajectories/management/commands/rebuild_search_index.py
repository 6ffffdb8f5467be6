"""python manage.py rebuild_search_index: drop and rebuild the full-text index of trajectories."""

from django.core.management.base import BaseCommand
from django.db import transaction

from webapp.trajectories import search
from webapp.trajectories.models import Message, Trajectory


class Command(BaseCommand):
    help = "Rebuild the full-text search index from the stored messages (after a restore, say)."

    def handle(self, *args, **options):
        with transaction.atomic():
            search.clear()
            n = search.reindex(Trajectory, Message)
        self.stdout.write(f"indexed {n} trajectories")
