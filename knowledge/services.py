"""Writes to the library: importing sources, indexing them, and the jobs that do it.

The pipeline (DESIGN.md §4), one `IndexJob` at a time per source:

    upload ─▶ source (pending) + job (queued) ─▶ on commit: Celery task
    task ─▶ job_run: claim ─▶ chunk ─▶ embed (if the campaign has a model)
         ─▶ swap: old passages out, new passages, lexical rows and vectors
            in, source ready, job done — one transaction.

Everything slow (chunking, the embedding calls) happens before the swap and
outside any transaction, so the old passages stay searchable until the new
ones replace them, and a worker killed mid-job leaves them as they were. The
job row is claimed with a conditional UPDATE, so a duplicate delivery finds
nothing to do, and a job whose worker died (stale heartbeat, or a dead
process on this host) is put back in the queue by `jobs_recover`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import PurePath

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from contextbuild.tokens import encoding
from storyapp.models import Campaign, EndpointProfile

from . import embeddings, lexical
from .chunking import chunk_text
from .models import IndexJob, KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource, WorkerHeartbeat

log = logging.getLogger(__name__)

ALLOWED_SUFFIXES = (".md", ".markdown", ".txt")
#: A running job whose heartbeat is older than this is taken to be orphaned.
#: Longer than one embedding request can take, so a slow endpoint is not
#: mistaken for a dead worker; a worker restart on the same host recovers
#: its dead predecessor's jobs at once instead (see `jobs_recover`).
STALE_AFTER = timedelta(minutes=3)
#: The retries a task makes on a temporary endpoint failure, and their spacing.
MAX_RETRIES = 5
BACKOFF_SECONDS = (10, 30, 60, 120, 300)
BULK_BATCH = 500
Source = KnowledgeSource


class ImportRefused(Exception):
    """This file cannot be imported; the message says why, for the reader."""


class DuplicateSource(ImportRefused):
    def __init__(self, filename: str, existing: KnowledgeSource):
        self.existing = existing
        super().__init__(f"{filename}: the same text is already in this library as “{existing.title}”.")


class RetryLater(Exception):
    """The job met a temporary failure and went back to the queue."""


class _Abandoned(Exception):
    """The job was cancelled or taken over while this process worked on it."""


def count_tokens(text: str) -> int:
    """cl100k tokens, counted without the special-token scan (same count as
    `contextbuild.tokens.count_tokens` for imported text, a third faster)."""
    return len(encoding().encode_ordinary(text)) if text else 0


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ------------------------------------------------------------------ import


@dataclass
class ImportResult:
    created: list[KnowledgeSource] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self.duplicates + self.refused


def source_text_from_upload(*, filename: str, data: bytes) -> str:
    """The text of an uploaded file, or ImportRefused saying what is wrong."""
    name = PurePath(filename or "").name
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    if not name.lower().endswith(ALLOWED_SUFFIXES):
        raise ImportRefused(f"{name or 'The file'}: only Markdown (.md, .markdown) and plain text (.txt) files can be imported.")
    if len(data) > limit:
        raise ImportRefused(f"{name}: the file is {human_size(len(data))}, over the {human_size(limit)} limit.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRefused(
            f"{name}: the file is not UTF-8 text (undecodable byte at position {exc.start}). "
            "Save it as UTF-8 and upload it again."
        ) from exc
    if "\x00" in text:
        raise ImportRefused(f"{name}: the file contains binary data, not text.")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise ImportRefused(f"{name}: the file is empty.")
    return text


def human_size(n: int) -> str:
    """Sizes as the pages print them (Django's filesizeformat, 1 MB = 1,048,576
    bytes), so a limit reads the same in the hint and in the refusal."""
    return filesizeformat(n).replace("\xa0", " ")


#: A Markdown heading of level 1 or 2 near the top names the file better than its file name.
TITLE_HEADING = re.compile(r"^\s{0,3}#{1,2}\s+(.+?)\s*#*\s*$", re.MULTILINE)
TITLE_SEARCH_CHARS = 2000


def title_for(filename: str, text: str) -> str:
    """The file's first heading when it has one early on, else its file name without the extension."""
    match = TITLE_HEADING.search(text[:TITLE_SEARCH_CHARS])
    if match and match.group(1).strip():
        return match.group(1).strip()
    return PurePath(filename).stem or filename


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
) -> KnowledgeSource:
    """Stores a source and queues its index job (on commit, when `enqueue`).

    Raises DuplicateSource when the campaign already holds the same text,
    ImportRefused for always-include outside Canon.
    """
    if always_include and classification != Source.Classification.CANON:
        raise ImportRefused("Only Canon sources can be always included.")
    name = PurePath(filename).name
    digest = content_hash(text)
    existing = Source.objects.filter(campaign=campaign, sha256=digest).first()
    if existing is not None:
        raise DuplicateSource(name, existing)
    try:
        with transaction.atomic():
            source = Source.objects.create(
                campaign=campaign,
                title=(title or title_for(name, text))[:200],
                original_filename=name[:255],
                sha256=digest,
                content=text,
                size_bytes=len(text.encode("utf-8")),
                classification=classification,
                visibility=visibility,
                always_include=always_include,
                enabled=enabled,
            )
            job = _job_for(source, kind=IndexJob.Kind.INDEX)
            if enqueue:
                _enqueue(job)
    except IntegrityError as exc:
        # Another request stored the same text a moment ago.
        existing = Source.objects.filter(campaign=campaign, sha256=digest).first()
        if existing is None:
            raise
        raise DuplicateSource(name, existing) from exc
    return source


def sources_import(
    *,
    campaign: Campaign,
    files: Iterable[tuple[str, bytes]],
    classification: str = Source.Classification.REFERENCE,
    visibility: str = Source.Visibility.VISIBLE,
    always_include: bool = False,
    enqueue: bool = True,
) -> ImportResult:
    """Imports each file on its own: one bad file refuses that file only."""
    result = ImportResult()
    for filename, data in files:
        try:
            text = source_text_from_upload(filename=filename, data=data)
            source = source_create(
                campaign=campaign,
                filename=filename,
                text=text,
                classification=classification,
                visibility=visibility,
                always_include=always_include,
                enqueue=enqueue,
            )
        except DuplicateSource as exc:
            result.duplicates.append(str(exc))
        except ImportRefused as exc:
            result.refused.append(str(exc))
        else:
            result.created.append(source)
    return result


@transaction.atomic
def source_update(
    *,
    source: KnowledgeSource,
    title: str,
    classification: str,
    visibility: str,
    always_include: bool,
    enabled: bool,
) -> KnowledgeSource:
    """Changes how a source is used. None of these need a re-index: retrieval
    reads them from the source row at query time."""
    if always_include and classification != Source.Classification.CANON:
        raise ImportRefused("Only Canon sources can be always included.")
    source.title = title.strip()[:200] or source.title
    source.classification = classification
    source.visibility = visibility
    source.always_include = always_include
    source.enabled = enabled
    source.save(update_fields=["title", "classification", "visibility", "always_include", "enabled", "updated"])
    return source


@transaction.atomic
def source_delete(*, source: KnowledgeSource) -> None:
    """Deletes the source, its passages, vectors and jobs. A worker still on
    one of its jobs finds the source gone at the swap and stores nothing."""
    KnowledgeEmbedding.objects.filter(chunk__source=source).delete()
    KnowledgeChunk.objects.filter(source=source).only("pk").delete()
    source.delete()


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
    while IndexJob.objects.filter(pk=job.pk, state__in=IndexJob.ACTIVE).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    source.refresh_from_db()
    return source


# ------------------------------------------------------------------ jobs


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
    from .tasks import index_job

    index_job.delay_on_commit(job.pk)


def job_claim(job_id: int, *, now: datetime, worker: str, task_id: str = "") -> IndexJob | None:
    """Takes the job for this process, or None when it is not ours to run:
    already done, failed, cancelled, or running under a live heartbeat."""
    claimable = Q(state=IndexJob.State.QUEUED) | Q(state=IndexJob.State.RUNNING, heartbeat__lt=now - STALE_AFTER)
    claimed = IndexJob.objects.filter(claimable, pk=job_id).update(
        state=IndexJob.State.RUNNING,
        attempts=F("attempts") + 1,
        started=now,
        heartbeat=now,
        finished=None,
        worker=worker[:200],
        task_id=task_id[:64],
        progress=0,
        step="Starting",
    )
    if not claimed:
        return None
    job = IndexJob.objects.select_related("source__campaign").get(pk=job_id)
    Source.objects.filter(pk=job.source_id).exclude(index_state=Source.IndexState.READY).update(
        index_state=Source.IndexState.INDEXING
    )
    return job


def job_run(
    *,
    job_id: int,
    now: datetime,
    final_attempt: bool = True,
    task_id: str = "",
    clock: Callable[[], datetime] = timezone.now,
) -> IndexJob | None:
    """Runs one index job to its end, if it is this process's to run.

    1. Claim it (a conditional UPDATE; None if it is not claimable).
    2. Chunk the source's text (index jobs) or read its live passages
       (re-embed jobs).
    3. Embed the passages, when the campaign's profile has a model,
       heartbeating after each batch; a cancel or takeover stops here.
    4. Swap, in one transaction.
    A temporary endpoint failure puts the job back in the queue and raises
    RetryLater, unless this is the final attempt, which fails it.
    """
    job = job_claim(job_id, now=now, worker=worker_name(), task_id=task_id)
    if job is None:
        return None
    attempt = job.attempts
    try:
        if job.kind == IndexJob.Kind.EMBED:
            _run_embed(job, attempt, clock)
        else:
            _run_index(job, attempt, clock)
    except _Abandoned:
        log.info("Index job %s was cancelled or taken over; stopping.", job_id)
    except embeddings.EmbeddingUnavailable as exc:
        if not final_attempt:
            _job_release(job, attempt, str(exc), now=clock())
            raise RetryLater(str(exc)) from exc
        _job_fail(job, attempt, f"{exc} (gave up after {attempt} attempts)", now=clock())
    except embeddings.EmbeddingFailed as exc:
        _job_fail(job, attempt, str(exc), now=clock())
    except Exception as exc:  # anything else is a bug: keep the whole story for the operators
        log.exception("Index job %s failed", job_id)
        _job_fail(job, attempt, f"Indexing failed: {exc.__class__.__name__}: {exc}",
                  now=clock(), detail=traceback.format_exc())
    return IndexJob.objects.filter(pk=job_id).first()


def _beat(job: IndexJob, attempt: int, *, now: datetime, progress: int, step: str) -> None:
    """Progress and heartbeat in one conditional UPDATE; raises _Abandoned
    when the job is no longer this attempt's (cancelled, or taken over)."""
    alive = IndexJob.objects.filter(pk=job.pk, state=IndexJob.State.RUNNING, attempts=attempt).update(
        heartbeat=now, progress=progress, step=step[:200]
    )
    if not alive:
        raise _Abandoned


def _embed_all(job, attempt, clock, profile: EndpointProfile | None, inputs: list[str]) -> list[bytes]:
    if profile is None or not inputs:
        return []
    model = profile.embedding_model.strip()

    def on_batch(done: int) -> None:
        _beat(job, attempt, now=clock(), progress=10 + 85 * done // len(inputs),
              step=f"Embedding with {model}: {done} of {len(inputs)} passages")

    on_batch(0)
    return list(embeddings.embed(profile, inputs, on_batch=on_batch))


def _embedding_input(heading_path: str, text: str) -> str:
    # The trail says what the passage is about ("Westhaven > Tides"), which
    # a passage that never names its subject needs to be found by meaning.
    return f"{heading_path}\n\n{text}" if heading_path else text


def _run_index(job: IndexJob, attempt: int, clock) -> None:
    source = job.source
    passages = chunk_text(source.content, count=count_tokens)
    _beat(job, attempt, now=clock(), progress=10, step=f"Split into {len(passages)} passages")
    profile = embeddings.profile_for(source.campaign)
    # The embedding endpoint can only cost the semantic half: the passages go
    # live lexically whatever it does, with its reason on the source, and a
    # temporary failure leaves a re-embed job to try again.
    note, retry_embedding = "", False
    try:
        vectors = _embed_all(job, attempt, clock, profile, [_embedding_input(p.heading_path, p.text) for p in passages])
    except embeddings.EmbeddingUnavailable as exc:
        vectors, note, retry_embedding = [], f"Semantic search is off for this file for now: {exc}", True
    except embeddings.EmbeddingFailed as exc:
        vectors, note = [], f"Semantic search is off for this file: {exc}"
    model = profile.embedding_model.strip() if profile is not None and vectors else ""
    now = clock()
    with transaction.atomic():
        locked = _lock_for_swap(job, attempt)
        if locked is None:
            return
        KnowledgeEmbedding.objects.filter(chunk__source=locked).delete()
        KnowledgeChunk.objects.filter(source=locked).only("pk").delete()
        chunk_ids = _insert_chunks(locked, passages)
        _store_vectors(chunk_ids, vectors, model)
        Source.objects.filter(pk=locked.pk).update(
            index_state=Source.IndexState.READY,
            error=note,
            passage_count=len(passages),
            token_count=sum(p.token_count for p in passages),
            indexed_sha256=job.content_sha256,
            embedding_model=model,
            indexed_at=now,
            updated=now,
            revision=F("revision") + 1,
        )
        _job_done(job, now=now, passages=len(passages), step=_done_step(len(passages), model))
        # Compared with the model this job tried, so a failed embedding is not
        # retried at once as a "model change"; a temporary one is retried below.
        tried = profile.embedding_model.strip() if profile is not None else ""
        _follow_model_change(locked.campaign, model or tried)
        if retry_embedding:
            _enqueue(_job_for(locked, kind=IndexJob.Kind.EMBED))


def _run_embed(job: IndexJob, attempt: int, clock) -> None:
    """Re-embeds the live passages with the campaign's current model. The
    passages themselves do not change, so lexical search is unaffected."""
    source = job.source
    profile = embeddings.profile_for(source.campaign)
    model = profile.embedding_model.strip() if profile is not None else ""
    live = list(KnowledgeChunk.objects.filter(source=source).order_by("index").values_list("pk", "heading_path", "text"))
    if not model or source.embedding_model == model or not live:
        _job_done(job, now=clock(), passages=len(live), step="Nothing to re-embed")
        return
    vectors = _embed_all(job, attempt, clock, profile, [_embedding_input(h, t) for _, h, t in live])
    now = clock()
    with transaction.atomic():
        locked = _lock_for_swap(job, attempt)
        if locked is None:
            return
        ids = [pk for pk, _, _ in live]
        if sorted(KnowledgeChunk.objects.filter(source=locked).values_list("pk", flat=True)) != sorted(ids):
            raise _Abandoned  # the passages were rebuilt meanwhile; that job embedded them
        KnowledgeEmbedding.objects.filter(chunk__source=locked).delete()
        _store_vectors(ids, vectors, model)
        Source.objects.filter(pk=locked.pk).update(
            embedding_model=model, error="", updated=now, revision=F("revision") + 1
        )
        _job_done(job, now=now, passages=len(ids), step=_done_step(len(ids), model))
        _follow_model_change(locked.campaign, model)


def _lock_for_swap(job: IndexJob, attempt: int) -> KnowledgeSource | None:
    """The source row, locked, if this attempt still owns the job and the
    source still holds the text the job was made for; else None."""
    locked = Source.objects.select_for_update().filter(pk=job.source_id).first()
    if locked is None:
        return None  # deleted meanwhile, and the job with it
    if not IndexJob.objects.filter(pk=job.pk, state=IndexJob.State.RUNNING, attempts=attempt).exists():
        raise _Abandoned
    if locked.sha256 != job.content_sha256:
        _job_done(job, now=timezone.now(), passages=0, step="Superseded: the source's text changed")
        return None
    return locked


def _insert_chunks(source: KnowledgeSource, passages) -> list[int]:
    """Writes the passages with their lexical index data; returns their ids
    in passage order."""
    lexical.insert(
        rows=[(source.pk, source.campaign_id, p.index, p.heading_path, p.text, p.token_count) for p in passages]
    )
    by_index = dict(KnowledgeChunk.objects.filter(source=source).values_list("index", "pk"))
    return [by_index[p.index] for p in passages]


def _store_vectors(chunk_ids: list[int], vectors: list[bytes], model: str) -> None:
    if not vectors:
        return
    dimensions = len(vectors[0]) // embeddings.DTYPE.itemsize
    KnowledgeEmbedding.objects.bulk_create(
        [
            KnowledgeEmbedding(chunk_id=chunk_id, model=model, dimensions=dimensions, vector=vector)
            for chunk_id, vector in zip(chunk_ids, vectors, strict=True)
        ],
        batch_size=BULK_BATCH,
    )


def _done_step(passages: int, model: str) -> str:
    return f"{passages} passages" + (f", embedded with {model}" if model else ", lexical only")


def _job_done(job: IndexJob, *, now: datetime, passages: int, step: str) -> None:
    IndexJob.objects.filter(pk=job.pk).update(
        state=IndexJob.State.DONE, progress=100, heartbeat=now, finished=now,
        passages=passages, step=step[:200], error="",
    )


def _follow_model_change(campaign: Campaign, embedded_with: str) -> None:
    """If the campaign's model changed while the job ran, re-embed again."""
    if embeddings.model_for(campaign) != embedded_with:
        transaction.on_commit(lambda: embeddings_refresh(campaign_ids=[campaign.pk]))


def _job_release(job: IndexJob, attempt: int, error: str, *, now: datetime) -> None:
    IndexJob.objects.filter(pk=job.pk, state=IndexJob.State.RUNNING, attempts=attempt).update(
        state=IndexJob.State.QUEUED, heartbeat=now, error=error, step="Waiting to retry after an endpoint error"
    )


def _job_fail(job: IndexJob, attempt: int, error: str, *, now: datetime, detail: str = "") -> None:
    """Fails the job. A source with live passages stays ready (and says the
    rebuild failed); one without becomes failed, with the reason."""
    with transaction.atomic():
        failed = IndexJob.objects.filter(pk=job.pk, state=IndexJob.State.RUNNING, attempts=attempt).update(
            state=IndexJob.State.FAILED, heartbeat=now, finished=now, step="Failed",
            error=f"{error}\n\n{detail}".strip(),
        )
        if failed:
            _source_after_stop(job.source_id, error)


def _source_after_stop(source_id: int, error: str) -> None:
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


def jobs_recover(*, now: datetime, restarted_worker: str = "") -> list[int]:
    """Puts orphaned running jobs back in the queue and re-sends them.

    Orphaned: a heartbeat older than STALE_AFTER, or a claim by a process on
    this host that no longer exists (a worker killed and restarted here is
    recovered at once, without waiting out the heartbeat). A re-sent job
    that turns out to be alive after all is refused by the claim, harmlessly.
    """
    host = socket.gethostname()
    orphaned = []
    for job_id, worker, heartbeat in IndexJob.objects.filter(state=IndexJob.State.RUNNING).values_list(
        "pk", "worker", "heartbeat"
    ):
        if heartbeat is None or heartbeat < now - STALE_AFTER or _dead_here(worker, host, restarted_worker):
            orphaned.append((job_id, worker))
    recovered = []
    for job_id, worker in orphaned:
        with transaction.atomic():
            if IndexJob.objects.filter(pk=job_id, state=IndexJob.State.RUNNING, worker=worker).update(
                state=IndexJob.State.QUEUED, step="Requeued: its worker stopped", worker=""
            ):
                _enqueue(IndexJob(pk=job_id))
                recovered.append(job_id)
    if recovered:
        log.warning("Requeued index jobs whose worker stopped: %s", recovered)
    return recovered


def _dead_here(worker: str, host: str, restarted_worker: str) -> bool:
    name, _, pid = worker.rpartition(":")
    if name != host or not pid.isdigit():
        return False
    if worker == restarted_worker:
        return True  # this very process, just started: it runs nothing yet
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def embeddings_refresh(*, campaign_ids: Iterable[int]) -> list[IndexJob]:
    """Queues a re-embed for every ready source whose vectors came from a
    model other than its campaign's current one. No model: nothing to do
    (retrieval is lexical only, and old vectors are never read)."""
    jobs = []
    for campaign in Campaign.objects.filter(pk__in=list(campaign_ids)).select_related("endpoint"):
        model = embeddings.model_for(campaign)
        if not model:
            continue
        stale = Source.objects.filter(campaign=campaign, index_state=Source.IndexState.READY).exclude(
            embedding_model=model
        )
        for source in stale:
            with transaction.atomic():
                job = _job_for(source, kind=IndexJob.Kind.EMBED)
                _enqueue(job)
            jobs.append(job)
    return jobs


def embeddings_refresh_for_profile(*, profile_id: int) -> list[IndexJob]:
    """After an endpoint profile changes: the campaigns that may use it."""
    profile = EndpointProfile.objects.filter(pk=profile_id).first()
    if profile is None:
        return []
    uses = Q(endpoint_id=profile_id) | Q(endpoint__isnull=True)
    campaign_ids = (
        Source.objects.filter(index_state=Source.IndexState.READY)
        .filter(**{"campaign__in": Campaign.objects.filter(uses)})
        .values_list("campaign_id", flat=True)
        .distinct()
    )
    return embeddings_refresh(campaign_ids=list(campaign_ids))


def worker_heartbeat(*, name: str, now: datetime, queues: Sequence[str] = ()) -> None:
    WorkerHeartbeat.objects.update_or_create(name=name[:200], defaults={"seen": now, "queues": ",".join(queues)[:200]})


def worker_gone(*, name: str) -> None:
    WorkerHeartbeat.objects.filter(name=name[:200]).delete()
