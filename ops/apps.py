from django.apps import AppConfig

from lifecycle import workers


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"

    def ready(self) -> None:
        # Imported here: these modules read models, which load after the apps.
        from . import health, worker

        worker.connect()
        workers.answered_by(health.live_workers)
