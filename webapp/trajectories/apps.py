from django.apps import AppConfig
from django.db.models.signals import post_migrate

from webapp.trajectories import search


class TrajectoriesConfig(AppConfig):
    name = "webapp.trajectories"
    label = "trajectories"

    def ready(self) -> None:
        post_migrate.connect(lambda sender, using="default", **kw: search.prune(using), sender=self,
                             weak=False, dispatch_uid="trajectory-search-prune")
