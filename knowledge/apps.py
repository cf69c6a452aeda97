from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        # Imported here: these modules read models, which load after the apps.
        # The tasks are imported so every process has them registered: the
        # services send them by name (lifecycle.sending).
        from . import signals, tasks  # noqa: F401

        signals.connect()
