"""Index job rows: making one, sending it to a worker, and an operator's cancel and retry.

Its own module because every other one queues work (a new source, a re-embed
after a model change, a job requeued from a dead worker) and all of them must
keep the same rules: at most one active job per source, sent on commit, and
a fair share of the workers for each reader.

A queued job whose `heartbeat` is empty is held in the database; once sent
to the broker, its heartbeat is the time it was sent (and, when running, the
time its worker last beat).
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from lifecycle import sending

from ..models import IndexJob, KnowledgeSource
from .progress import batches_clear

log = logging.getLogger(__name__)

Source = KnowledgeSource
#: The task that runs a job (knowledge.tasks), named: it imports this package.
INDEX_JOB = "knowledge.tasks.index_job"


def _job_for(source: KnowledgeSource, *, kind: str) -> IndexJob:
    """The source's active job, or a new queued one. At most one job per
    source is active (a database constraint); an active index job also
    embeds, so it stands in for a requested re-embed."""
    active = IndexJob.objects.in_flight().filter(source=source).first()
    if active is not None:
        return active
    try:
        with transaction.atomic():
            job = IndexJob.objects.create(source=source, kind=kind, content_sha256=source.sha256)
    except IntegrityError:
        return IndexJob.objects.in_flight().get(source=source)
    if kind == IndexJob.Kind.INDEX:
        Source.objects.filter(pk=source.pk).exclude(index_state=Source.IndexState.READY).update(
            index_state=Source.IndexState.PENDING, error=""
        )
        Source.objects.filter(pk=source.pk, index_state=Source.IndexState.READY).update(error="")
    return job


def _enqueue(job: IndexJob) -> None:
    """Sends the job's reader's next jobs once the transaction commits:
    this one then, or as soon as the reader's earlier ones end."""
    owner_id = IndexJob.objects.filter(pk=job.pk).values_list("source__campaign__owner_id", flat=True).first()
    if owner_id is not None:
        transaction.on_commit(partial(dispatch, owner_id=owner_id))


def fair_share(slots: int) -> int:
    """Of one reader's index jobs, at most this many are sent to the workers
    (waiting in the broker or running) at once; the rest are held here and
    sent as earlier ones end. One below the workers' `slots` (and at least
    one), so a reader's library of sixty files never takes every slot:
    another reader's upload goes to a free one at once."""
    return max(1, slots - 1)


def dispatch(*, owner_id: int) -> list[int]:
    """Sends the reader's oldest held jobs, up to their fair share in flight.
    A broker that refuses leaves the job held, for the workers' sweep."""
    mine = IndexJob.objects.filter(source__campaign__owner_id=owner_id)
    held = mine.held().order_by("created", "pk").values_list("pk", flat=True)
    share = fair_share(settings.LOREMASTER_INDEX_SLOTS)
    sent = []
    for job_id in list(held[: max(0, share - mine.sent().count())]):
        if not IndexJob.objects.held().filter(pk=job_id).update(heartbeat=timezone.now()):
            continue
        try:
            sending.send(INDEX_JOB, job_id)
        except Exception:
            log.exception("Could not send index job %s; it stays held for the sweep", job_id)
            IndexJob.objects.waiting().filter(pk=job_id).update(heartbeat=None)
            break
        sent.append(job_id)
    return sent


def dispatch_held() -> None:
    """The sweep's backstop: sends held jobs of every reader who has some
    (a dispatch missed when a worker died between a job's end and its next)."""
    owners = IndexJob.objects.held().values_list("source__campaign__owner_id", flat=True).distinct()
    for owner_id in list(owners):
        dispatch(owner_id=owner_id)


def _source_after_stop(source_id: int, error: str) -> None:
    """What a job that stopped without swapping leaves on its source: a ready
    source keeps its passages and says the rebuild failed; any other fails."""
    Source.objects.filter(pk=source_id, index_state=Source.IndexState.READY).update(
        error=f"The last re-index did not finish: {error} The previous passages are still in use."
    )
    Source.objects.filter(pk=source_id).exclude(index_state=Source.IndexState.READY).update(
        index_state=Source.IndexState.FAILED, error=error
    )


@transaction.atomic
def job_cancel(*, job: IndexJob, now: datetime) -> bool:
    """Stops a queued or running job. A running worker notices at its next
    heartbeat and stores nothing."""
    cancelled = IndexJob.objects.in_flight().filter(pk=job.pk).update(
        state=IndexJob.State.CANCELLED, finished=now, step="Cancelled", error="Cancelled by an operator."
    )
    if cancelled:
        _source_after_stop(job.source_id, "Indexing was cancelled by an operator. Press Re-index to try again.")
        batches_clear(job.pk)
        _enqueue(job)  # the reader's next held job may go
    return bool(cancelled)


@transaction.atomic
def job_retry(*, job: IndexJob) -> IndexJob:
    """Queues the failed or cancelled job's work again, as a new job. A job
    that is still going or finished well is left alone."""
    job = IndexJob.objects.select_related("source").get(pk=job.pk)
    if job.active or job.state == IndexJob.State.DONE:
        return job
    new = _job_for(job.source, kind=job.kind)
    _enqueue(new)
    return new
