from django.apps import AppConfig
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from webapp.jobs import endpoints


class JobsConfig(AppConfig):
    name = "webapp.jobs"
    label = "jobs"

    def ready(self) -> None:
        checks.register(check_openai_endpoints)


def check_openai_endpoints(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """A malformed NLAC_OPENAI_ENDPOINTS is reported at start (`manage.py check`), not at the first openai job."""
    try:
        endpoints.configured()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="jobs.E001")]
    return []
