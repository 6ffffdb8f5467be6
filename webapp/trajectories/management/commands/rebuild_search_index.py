"""python manage.py rebuild_search_index: drop and rebuild the full-text index of trajectories."""

from django.core.management.base import BaseCommand
from django.db import transaction

from webapp.trajectories import search
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import iter_records


class Command(BaseCommand):
    help = "Rebuild the full-text search index from the stored messages (after a restore, say)."

    def handle(self, *args, **options):
        n, batch = 0, []
        with transaction.atomic():
            search.clear()
            ids = iter(Trajectory.objects.order_by("id").values_list("id", flat=True))
            for tid, record in zip(ids, iter_records(Trajectory.objects.all()), strict=True):
                batch.append((tid, search.document(record)))
                if len(batch) >= 500:
                    search.index(batch)
                    n, batch = n + len(batch), []
            search.index(batch)
            n += len(batch)
        self.stdout.write(f"indexed {n} trajectories")
