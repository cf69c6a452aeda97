"""Celery tasks: thin interfaces that load by id and call a service."""

from celery import shared_task
from django.utils import timezone

from lifecycle import policy

from . import services


@shared_task(bind=True, ignore_result=True, max_retries=services.MAX_RETRIES)
def index_job(self, job_id: int) -> None:
    """Runs one index job. The claim inside `job_run` makes a redelivery or
    a second copy harmless; a temporary endpoint failure comes back later."""
    retries = self.request.retries
    try:
        services.job_run(
            job_id=job_id,
            now=timezone.now(),
            final_attempt=retries >= self.max_retries,
            task_id=self.request.id or "",
        )
    except policy.RetryLater as exc:
        raise self.retry(exc=exc, countdown=exc.countdown) from exc
