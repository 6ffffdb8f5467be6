from workers.tasks.health import ping

__all__ = ["ping"]
