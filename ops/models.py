from django.db import models


class WorkerHeartbeat(models.Model):
    """A row per worker process, touched every few seconds while it lives:
    how the monitor tells whether any worker is alive on any broker."""

    name = models.CharField(max_length=200, unique=True)
    seen = models.DateTimeField()
    #: The queues the worker consumes, comma-separated: readiness needs a
    #: live worker on each (narrations have a queue of their own).
    queues = models.CharField(max_length=200, blank=True)
    #: The local embedding models this worker can run (endpoints.localembed),
    #: comma-separated: how a page, which never loads PyTorch, knows.
    local_models = models.CharField(max_length=200, blank=True)

    class Meta:
        # The table it had in knowledge, where it was first kept.
        db_table = "knowledge_workerheartbeat"

    def __str__(self) -> str:
        return self.name
