from django.apps import AppConfig


class TrajectoriesConfig(AppConfig):
    name = "webapp.trajectories"
    label = "trajectories"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from webapp.trajectories import search
        from webapp.trajectories.models import Trajectory

        post_delete.connect(lambda sender, instance, **kw: search.forget(instance.pk), sender=Trajectory,
                            weak=False, dispatch_uid="trajectory-search-forget")
