from django.apps import AppConfig


class TrajectoriesConfig(AppConfig):
    name = "webapp.trajectories"
    label = "trajectories"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from webapp.trajectories import search

        post_migrate.connect(lambda sender, using="default", **kw: search.prune(using), sender=self,
                             weak=False, dispatch_uid="trajectory-search-prune")
