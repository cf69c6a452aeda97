"""What a reader, a command or an importer does to a source: upload and
create it, change how it is used, delete it, have it re-indexed.

Its own module because these are the library's entry points, called from
views, forms, commands and the campaign bundle: every write of a source's
settings comes through here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import PurePath

from django.db import IntegrityError, transaction
from django.utils import timezone

from lifecycle.policy import RetryLater
from storyapp.models import Campaign

from .. import segments
from ..models import IndexJob, KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from .indexing import job_run
from .jobs import _enqueue, _job_for
from .reading import DuplicateSource, content_hash, source_always_include_check, title_for

Source = KnowledgeSource


def source_create(
    *,
    campaign: Campaign,
    filename: str,
    text: str,
    classification: str = Source.Classification.REFERENCE,
    visibility: str = Source.Visibility.VISIBLE,
    always_include: bool = False,
    enabled: bool = True,
    title: str = "",
    enqueue: bool = True,
    secret_seat: str = "",
) -> KnowledgeSource:
    """Stores a source and queues its index job (on commit, when `enqueue`);
    `secret_seat` makes it known to that seat alone (a bundle's).

    Raises DuplicateSource when the campaign already holds the same text,
    ImportRefused for always-include outside Canon.
    """
    source_always_include_check(classification=classification, always_include=always_include)
    name = PurePath(filename).name
    return source_store(
        campaign=campaign, filename=name, content=text, enqueue=enqueue,
        title=title or title_for(name, text), classification=classification, visibility=visibility,
        always_include=always_include, enabled=enabled, secret_seat=secret_seat.strip()[:100],
    )


def source_store(
    *,
    campaign: Campaign,
    filename: str,
    content: str,
    title: str,
    enqueue: bool,
    then: Callable[[KnowledgeSource], None] | None = None,
    digest: str = "",
    **fields,
) -> KnowledgeSource:
    """Writes a checked source row, with `then(source)` (a lorebook's
    entries) and its index job in the same transaction, and queues the job
    on commit. The one place a source is stored, so the duplicate check and
    its race are handled once: DuplicateSource when the campaign already
    holds the same content, also when another request stored it a moment ago.
    `digest` stands for the content's hash while the content is an upload
    not read yet (knowledge.services.uploads)."""
    digest = digest or content_hash(content)
    existing = Source.objects.filter(campaign=campaign, sha256=digest).first()
    if existing is not None:
        raise DuplicateSource(filename, existing)
    try:
        with transaction.atomic():
            source = Source.objects.create(
                campaign=campaign,
                title=title[:200],
                original_filename=filename[:255],
                sha256=digest,
                content=content,
                size_bytes=len(content.encode("utf-8")),
                **fields,
            )
            if then is not None:
                then(source)
            job = _job_for(source, kind=IndexJob.Kind.INDEX)
            if enqueue:
                _enqueue(job)
    except IntegrityError as exc:
        existing = Source.objects.filter(campaign=campaign, sha256=digest).first()
        if existing is None:
            raise
        raise DuplicateSource(filename, existing) from exc
    return source


@transaction.atomic
def source_update(
    *,
    source: KnowledgeSource,
    title: str,
    classification: str,
    visibility: str,
    always_include: bool,
    enabled: bool,
    secret_seat: str = "",
) -> KnowledgeSource:
    """Changes how a source is used. None of these need a re-index: retrieval
    reads them from the source row at query time (a seat's secret source is
    left out of it and given to the narrator as that seat's secret)."""
    source_always_include_check(classification=classification, always_include=always_include)
    source.title = title.strip()[:200] or source.title
    source.classification = classification
    source.visibility = visibility
    source.always_include = always_include
    source.enabled = enabled
    source.secret_seat = secret_seat.strip()[:100]
    source.save(update_fields=[
        "title", "classification", "visibility", "always_include", "enabled", "secret_seat", "updated"
    ])
    return source


@transaction.atomic
def source_delete(*, source: KnowledgeSource) -> None:
    """Deletes the source, its passages, vectors and jobs. A worker still on
    one of its jobs finds the source gone at the swap and stores nothing."""
    source_id = source.pk
    KnowledgeEmbedding.objects.filter(chunk__source=source).delete()
    KnowledgeChunk.objects.filter(source=source).only("pk").delete()
    source.delete()
    transaction.on_commit(lambda: segments.forget(source_id))


@transaction.atomic
def source_reindex(*, source: KnowledgeSource) -> IndexJob:
    """Queues a rebuild of the source's passages. The old passages, if any,
    stay searchable until the new ones are swapped in."""
    job = _job_for(source, kind=IndexJob.Kind.INDEX)
    _enqueue(job)
    return job


def source_index_now(source: KnowledgeSource, *, attempts: int = 3, pause: float = 2.0) -> KnowledgeSource:
    """Indexes one source in this process, no worker needed, and returns it
    ready or failed. For commands and the campaign-bundle importer.

    Temporary endpoint failures are retried `attempts` times, `pause`
    seconds apart (doubling). If a worker is already on the source's job,
    this waits for that job to finish instead of racing it.
    """
    job = _job_for(source, kind=IndexJob.Kind.INDEX)
    for attempt in range(attempts):
        try:
            job_run(job_id=job.pk, now=timezone.now(), final_attempt=attempt == attempts - 1)
            break
        except RetryLater:
            time.sleep(pause * 2**attempt)
    deadline = time.monotonic() + 30 * 60
    while IndexJob.objects.in_flight().filter(pk=job.pk).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    source.refresh_from_db()
    return source
