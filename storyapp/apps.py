from django.apps import AppConfig


class StoryappConfig(AppConfig):
    name = "storyapp"
    verbose_name = "Stories"

    def ready(self) -> None:
        from . import logs

        logs.connect()
