from celery import shared_task
from django.utils import timezone

from endpoints.embeddings import EmbeddingUnavailable
from lifecycle import policy

from . import derived, memories, narration, turnorder
from .models import DerivedJob


@shared_task(ignore_result=True)
def narrate_action(action_id: int) -> None:
    """Thin wrapper: the claim inside `narrate` makes a second copy (the sweep's re-send) harmless,
    and a shared campaign's next waiting action takes its place after it (idempotent too)."""
    narration.narrate(action_id)
    turnorder.after_narration(action_id=action_id, now=timezone.now())


@shared_task(bind=True, ignore_result=True, max_retries=DerivedJob.MAX_ATTEMPTS - 1)
def derive(self, job_id: int) -> None:
    """Runs one summary or memory job; the job row keeps the attempts, so a
    re-send after a killed worker counts as one more, not as a first."""
    retries = self.request.retries
    try:
        derived.run(job_id, final_attempt=retries >= self.max_retries)
    except policy.RetryLater as exc:
        raise self.retry(exc=exc, countdown=exc.countdown) from exc


@shared_task(bind=True, ignore_result=True, max_retries=2)
def reembed_memories(self, campaign_id: int) -> None:
    """Thin wrapper: `memories_reembed` writes only what is still stale, so
    a retry or a second delivery picks up where the first stopped."""
    try:
        memories.reembed(campaign_id)
    except EmbeddingUnavailable as exc:
        raise self.retry(exc=exc, countdown=policy.backoff(self.request.retries + 1)) from exc
