from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        from endpoints import status

        from . import selectors, signals

        signals.connect()
        # The profile page asks the workers' heartbeats (ours) which local
        # models they run; the endpoint layer cannot import them.
        status.provide_worker_models(selectors.worker_local_models)
