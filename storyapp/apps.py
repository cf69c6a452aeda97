from django.apps import AppConfig


class StoryappConfig(AppConfig):
    name = "storyapp"
    verbose_name = "Stories"

    def ready(self) -> None:
        # Imported here: these modules read models, which load after the apps.
        # The tasks are imported so every process has them registered: the
        # story machinery sends them by name (lifecycle.sending).
        from . import logs, signals, tasks  # noqa: F401

        logs.connect()
        signals.connect()
