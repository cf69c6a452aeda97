"""Index job rows: making one, sending it to a worker, and an operator's cancel and retry.

Its own module because every other one queues work (a new source, a re-embed
after a model change, a job requeued from a dead worker) and all of them must
keep the same rule: at most one active job per source, sent on commit.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction

from ..models import IndexJob, KnowledgeSource

Source = KnowledgeSource


def _job_for(source: KnowledgeSource, *, kind: str) -> IndexJob:
    """The source's active job, or a new queued one. At most one job per
    source is active (a database constraint); an active index job also
    embeds, so it stands in for a requested re-embed."""
    active = IndexJob.objects.filter(source=source, state__in=IndexJob.ACTIVE).first()
    if active is not None:
        return active
    try:
        with transaction.atomic():
            job = IndexJob.objects.create(source=source, kind=kind, content_sha256=source.sha256)
    except IntegrityError:
        return IndexJob.objects.get(source=source, state__in=IndexJob.ACTIVE)
    if kind == IndexJob.Kind.INDEX:
        Source.objects.filter(pk=source.pk).exclude(index_state=Source.IndexState.READY).update(
            index_state=Source.IndexState.PENDING, error=""
        )
        Source.objects.filter(pk=source.pk, index_state=Source.IndexState.READY).update(error="")
    return job


def _enqueue(job: IndexJob) -> None:
    from ..tasks import index_job

    index_job.delay_on_commit(job.pk)


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
    cancelled = IndexJob.objects.filter(pk=job.pk, state__in=IndexJob.ACTIVE).update(
        state=IndexJob.State.CANCELLED, finished=now, step="Cancelled", error="Cancelled by an operator."
    )
    if cancelled:
        _source_after_stop(job.source_id, "Indexing was cancelled by an operator. Press Re-index to try again.")
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
