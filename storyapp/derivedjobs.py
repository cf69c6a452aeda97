"""The DerivedJob's own mechanics, shared by summaries and memories.

A job is queued (deduplicated by its key), sent to a worker on commit,
claimed by a conditional UPDATE, marked done or failed (with an attempt
count and backoff from lifecycle.policy), and re-sent by the sweep when its
message was lost. What a job *does* lives in `summaries` and `memories`;
`derived` dispatches to them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from endpoints.client import endpoint_for
from lifecycle import policy, sending

from .models import DerivedJob, Summary

#: Unfinished or failed jobs of each kind the report mentions.
NOTICED_JOBS = 5


#: The task that runs a job (storyapp.tasks), named: it imports this module.
DERIVE = "storyapp.tasks.derive"


@dataclass(frozen=True)
class Notice:
    kind: str
    state: str
    attempts: int
    error: str
    anchor: int

    def as_record(self) -> dict:
        return {"kind": self.kind, "state": self.state, "attempts": self.attempts, "error": self.error,
                "anchor": self.anchor}


def notices(campaign_id: int, lineage_ids) -> list[Notice]:
    """This lineage's derived work that is not done: failed, waiting or
    running, the newest of each kind, so failing memories never crowd out
    the summary the inspector explains a missing one by."""
    rows = (
        DerivedJob.objects.filter(campaign_id=campaign_id)
        .exclude(state=DerivedJob.State.DONE)
        .order_by("-updated")
        .values_list("kind", "state", "attempts", "error", "anchor_id")[:50]
    )
    per_kind: Counter[str] = Counter()
    kept = []
    for notice in (Notice(*row) for row in rows):
        if notice.anchor in lineage_ids and per_kind[notice.kind] < NOTICED_JOBS:
            per_kind[notice.kind] += 1
            kept.append(notice)
    return kept


def job_update(job_id: int, *, only=(), at: datetime | None = None, **fields) -> int:
    """Updates a job and its `updated` time, now or `at` (a queryset update
    does not touch auto_now, and staleness is read off it); `only` limits
    the update to jobs in those states. Returns how many rows changed."""
    jobs = DerivedJob.objects.filter(pk=job_id)
    if only:
        jobs = jobs.filter(state__in=only)
    return jobs.update(updated=at or timezone.now(), **fields)


def job_key(kind: str, anchor_id: int, start_id: int | None, level: int) -> str:
    return f"{kind}:{anchor_id}:{start_id or 'root'}:{level}"


def job_for(campaign_id: int, kind: str, *, anchor_id: int, start_id: int | None = None, level: int = 0) -> DerivedJob | None:
    """The job for this work, queued; None when it is already done or under way.

    A failed job asked for again is queued again with fresh attempts, so a
    summarizer that was down is retried by the next turn rather than never.
    """
    job, created = DerivedJob.objects.get_or_create(
        key=job_key(kind, anchor_id, start_id, level),
        defaults={"campaign_id": campaign_id, "kind": kind, "anchor_id": anchor_id, "starts_after_id": start_id,
                  "level": level},
    )
    if created or requeue_failed(job.pk):
        return job
    # Queued or running, and untouched for STALE_AFTER: its message was lost
    # (a broker that refused it) or its worker killed without a redelivery.
    # A running job beats; a job waiting for its next attempt is dated at
    # that attempt (`failed`).
    if DerivedJob.objects.stale(timezone.now()).filter(pk=job.pk).exists():
        job_update(job.pk, state=DerivedJob.State.QUEUED)
        return job
    return None


def requeue_failed(job_id: int) -> bool:
    """A job that gave up, queued again with fresh attempts; False for one
    that is not failed (done, or already queued again)."""
    return bool(job_update(job_id, only=[DerivedJob.State.FAILED], state=DerivedJob.State.QUEUED, attempts=0))


def retry_now(job: DerivedJob) -> bool:
    """The reader's "Try again now" on a failed summary or memory job: it is
    queued again and sent to a worker on commit. (The play page's Retry
    re-narrates the turn; it never touched this work.)"""
    if not requeue_failed(job.pk):
        return False
    _send(job.pk)
    return True


def enqueue(job: DerivedJob | None) -> None:
    if job is not None:
        _send(job.pk)


def _send(job_id: int) -> None:
    # Robust: a broker that cannot take the message must not fail the turn
    # that asked; the job stays queued and is sent again once it is stale.
    sending.send_on_commit(DERIVE, job_id, robust=True)


def resend_stale(campaign_id: int | None = None, *, now: datetime) -> None:
    """Sends stale jobs again, of one story (each of its turns sweeps) or of
    all (the workers' background sweep), so work whose message was lost is
    done soon after STALE_AFTER."""
    stale = DerivedJob.objects.stale(now)
    if campaign_id is not None:
        stale = stale.filter(campaign_id=campaign_id)
    for job_id in stale.values_list("pk", flat=True)[:100]:
        job_update(job_id, state=DerivedJob.State.QUEUED)
        _send(job_id)


def on_sweep(sender=None, *, now: datetime, **kwargs) -> None:
    """The workers' periodic sweep (lifecycle.signals.periodic_sweep)."""
    with transaction.atomic():
        resend_stale(now=now)


def claim(job_id: int) -> DerivedJob | None:
    """The job, marked running with one more attempt; None when it is done,
    gone (an edit withdrew it meanwhile), or running in another worker (a
    second delivery of its message) unless that one is stale."""
    if not DerivedJob.objects.claim(job_id, now=timezone.now()):
        return None
    return DerivedJob.objects.select_related("campaign", "anchor", "starts_after").get(pk=job_id)


class Unusable(Exception):
    """A reply that cannot be used (an empty summary)."""


def failed(job: DerivedJob, error: str, *, final: bool) -> None:
    """Stores the failure; unless it is final, the job waits for its next
    attempt, dated then, so the sweep does not take the wait for a loss."""
    countdown = policy.retry_in(job.attempts, final=final, max_attempts=DerivedJob.MAX_ATTEMPTS)
    error = without_retry_advice(error)
    if countdown is None:
        job_update(job.pk, only=[DerivedJob.State.RUNNING], state=DerivedJob.State.FAILED, error=error[:2000])
        return
    if job_update(job.pk, only=[DerivedJob.State.RUNNING], at=timezone.now() + timedelta(seconds=countdown),
            state=DerivedJob.State.QUEUED, error=error[:2000]):
        raise policy.RetryLater(error, countdown)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_RETRY_CLAUSE = re.compile(r"(?:[,;]\s*(?:so\s+|then\s+)?)?\bpress Retry\b.*", re.IGNORECASE | re.DOTALL)
#: What a narration's failure says of its text, which a job never had.
_TEXT_KEPT = "The text so far is kept"


def without_retry_advice(message: str) -> str:
    """A model failure's message, worded for a narration (endpoints.errors,
    endpoints.streaming), without its advice to press Retry: Retry
    re-narrates the turn and never re-runs a summary or memory job, so on
    a job's notice the advice sent readers to the wrong button. The clause
    before the advice stays ("Check that the server is running.")."""
    kept = []
    for sentence in _SENTENCE_END.split(message.strip()):
        head = _RETRY_CLAUSE.sub("", sentence).strip()
        if head == sentence.strip():
            if not sentence.startswith(_TEXT_KEPT):
                kept.append(sentence)
        elif head and not head.startswith(_TEXT_KEPT):
            kept.append(head.rstrip(",;.") + ".")
    return " ".join(kept)


def done(job: DerivedJob, note: str = "") -> None:
    job_update(job.pk, state=DerivedJob.State.DONE, error=note)


def still_mine(job: DerivedJob) -> bool:
    """Inside the write: the job is still this run's to finish (locked, not
    done by another delivery, its anchor not withdrawn by an edit)."""
    locked = DerivedJob.objects.select_for_update().filter(pk=job.pk, state=DerivedJob.State.RUNNING).first()
    return locked is not None and not Summary.objects.filter(job_id=job.pk).exists()


def campaign_profile(job: DerivedJob):
    profile = endpoint_for(job.campaign)
    if profile is None:
        raise Unusable("No model endpoint is configured for this campaign, so nothing can be summarized.")
    return profile
