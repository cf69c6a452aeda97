"""Running one index job: the claim, chunking, embedding, and the swap.

Its own module because this is the worker's side of the pipeline, where
the care about concurrency lives: the slow work runs outside any
transaction, and one function, `_swap`, makes a job's result live, for an
index job (new passages and vectors) and a re-embed job (new vectors for
the same passages) alike.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from contextbuild.tokens import encoding
from endpoints import calibration, embeddings
from endpoints.models import EndpointProfile
from lifecycle import policy, workers
from storyapp.models import Campaign

from .. import hubs, lexical, pgvector, segments, termstats
from ..models import IndexJob, KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from . import measure, parsing
from .reading import ImportRefused
from .jobs import _enqueue, _job_for, _source_after_stop
from .progress import _Abandoned, _beat, batches_clear, embed_resuming

log = logging.getLogger(__name__)

#: The retries a task makes on a temporary endpoint failure: one per step
#: of the lifecycle's backoff.
MAX_RETRIES = len(policy.BACKOFF_SECONDS)
BULK_BATCH = 500
Source = KnowledgeSource


def count_tokens(text: str) -> int:
    """cl100k tokens, counted without the special-token scan (same count as
    `contextbuild.tokens.count_tokens` for imported text, a third faster)."""
    return len(encoding().encode_ordinary(text)) if text else 0


def job_claim(job_id: int, *, now: datetime, worker: str, task_id: str = "") -> IndexJob | None:
    """Takes the job for this process, or None when it is not ours to run:
    already done, failed, cancelled, or running under a live heartbeat."""
    claimed = IndexJob.objects.claim(
        job_id, now=now, started=now, finished=None, worker=worker[:200], task_id=task_id[:64], progress=0,
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
    job = job_claim(job_id, now=now, worker=workers.this_worker(), task_id=task_id)
    if job is None:
        return None
    attempt = job.attempts
    try:
        # The heartbeat between progress updates (a slow embedding batch).
        with IndexJob.objects.filter(pk=job.pk, attempts=attempt).beating(clock):
            if job.kind == IndexJob.Kind.EMBED:
                _run_embed(job, attempt, clock)
            else:
                _run_index(job, attempt, clock)
    except _Abandoned:
        log.info("Index job %s was cancelled or taken over; stopping.", job_id)
    except embeddings.EmbeddingUnavailable as exc:
        countdown = policy.retry_in(attempt, final=final_attempt)
        if countdown is not None:
            _job_release(job, attempt, str(exc), retry_at=clock() + timedelta(seconds=countdown))
            raise policy.RetryLater(str(exc), countdown) from exc
        _job_fail(job, attempt, f"{exc} (gave up after {attempt} attempts)", now=clock())
    except (embeddings.EmbeddingFailed, measure.LoreRefused, ImportRefused) as exc:
        _job_fail(job, attempt, str(exc), now=clock())
    except Exception as exc:  # anything else is a bug: keep the whole story for the operators
        log.exception("Index job %s failed", job_id)
        _job_fail(job, attempt, f"Indexing failed: {exc.__class__.__name__}: {exc}",
                  now=clock(), detail=traceback.format_exc())
    _enqueue(job)  # this reader's next held job may go
    return IndexJob.objects.filter(pk=job_id).first()


def _hub_shares(profile: EndpointProfile | None, vectors: list[bytes]) -> list[float | None]:
    """Each vector's share of the neutral scenes it is close to (knowledge.hubs)."""
    model = embeddings.model_of(profile)
    return hubs.measured(
        model, vectors, floor=calibration.floor_for(model),
        embed=lambda texts: list(embeddings.embed(profile, texts)),
    )


def _embedding_input(heading_path: str, text: str) -> str:
    # The trail says what the passage is about ("Westhaven > Tides"), which
    # a passage that never names its subject needs to be found by meaning.
    return f"{heading_path}\n\n{text}" if heading_path else text


def _run_index(job: IndexJob, attempt: int, clock) -> None:
    """Chunks, checks the lore size on the text (measure), embeds, checks
    again with the vectors, and swaps."""
    source = job.source
    parsed = parsing.upload_parse(source) if source.upload else None
    if parsed is not None:
        _beat(job, attempt, now=clock(), progress=5, step="Read the file")
        source.content = parsed.fields["content"]
        passages, entry_bytes = parsing.parsed_passages(parsed, count=count_tokens)
    else:
        passages, entry_bytes = parsing.source_passages(source, count=count_tokens)
    lore_bytes = measure.text_bytes(source, passages, entry_bytes)
    measure.lore_check(source, passages=len(passages), lore_bytes=lore_bytes, stored_bytes=lore_bytes)
    _beat(job, attempt, now=clock(), progress=10, step=f"Split into {len(passages)} passages")
    profile = embeddings.profile_for(source.campaign)
    # The embedding endpoint can only cost the semantic half: the passages go
    # live lexically whatever it does, with its reason on the source, and a
    # temporary failure leaves a re-embed job to try again.
    note, retry_embedding = "", False
    try:
        vectors = embed_resuming(job, attempt, clock, profile, [_embedding_input(p.heading_path, p.text) for p in passages])
    except embeddings.EmbeddingUnavailable as exc:
        vectors, note, retry_embedding = [], f"Semantic search is off for this file for now: {exc}", True
    except embeddings.EmbeddingFailed as exc:
        vectors, note = [], f"Semantic search is off for this file: {exc}"
    stored_bytes = lore_bytes + measure.vectors_bytes(vectors)
    measure.lore_check(source, passages=len(passages), lore_bytes=lore_bytes, stored_bytes=stored_bytes)
    tried = embeddings.model_of(profile)
    model = tried if vectors else ""
    # Compared with the model this job tried, so a failed embedding is not
    # retried at once as a "model change"; a temporary one is retried below.
    now = clock()
    _swap(
        job, attempt, now=now, vectors=vectors, shares=_hub_shares(profile, vectors), model=model,
        embedded_with=model or tried,
        passages=lambda locked: _replace_passages(
            locked, passages, entry_ids=parsing.parsed_store(locked, parsed) if parsed else None
        ),
        source_fields={
            "index_state": Source.IndexState.READY,
            "error": note,
            "passage_count": len(passages),
            "token_count": sum(p.token_count for p in passages),
            "stored_bytes": stored_bytes,
            "indexed_sha256": parsed.fields["sha256"] if parsed else job.content_sha256,
            "indexed_at": now,
        },
        then_embed=retry_embedding,
    )


def _run_embed(job: IndexJob, attempt: int, clock) -> None:
    """Re-embeds the live passages with the campaign's current model. The
    passages themselves do not change, so lexical search is unaffected."""
    source = job.source
    profile = embeddings.profile_for(source.campaign)
    model = embeddings.model_of(profile)
    live = list(KnowledgeChunk.objects.filter(source=source).order_by("index").values_list("pk", "heading_path", "text"))
    if not model or source.embedding_model == model or not live:
        _job_done(job, now=clock(), passages=len(live), step="Nothing to re-embed")
        return
    vectors = embed_resuming(job, attempt, clock, profile, [_embedding_input(h, t) for _, h, t in live])
    ids = [pk for pk, _, _ in live]
    stored_bytes = source.stored_bytes - measure.stored_vectors_bytes(source) + measure.vectors_bytes(vectors)
    _swap(
        job, attempt, now=clock(), vectors=vectors, shares=_hub_shares(profile, vectors), model=model,
        embedded_with=model,
        passages=lambda locked: _same_passages(locked, ids),
        source_fields={"error": "", "stored_bytes": max(0, stored_bytes)},
    )


def _swap(
    job: IndexJob,
    attempt: int,
    *,
    now: datetime,
    vectors: list[bytes],
    shares: list[float | None],
    model: str,
    embedded_with: str,
    passages: Callable[[KnowledgeSource], list[int]],
    source_fields: dict,
    then_embed: bool = False,
) -> None:
    """Makes a job's work live, in one transaction, or stores nothing.

    1. Lock the source; nothing to store if it was deleted or its text
       changed, and _Abandoned if the job is no longer this attempt's.
    2. Old vectors out.
    3. `passages(locked)` puts the passages the vectors belong to in place
       and returns their ids in order: an index job writes its new ones, a
       re-embed job checks that the live ones are still those it embedded.
    4. New vectors in; the source's `source_fields`, its embedding model and
       a new revision; the job done.
    5. If the campaign's model is no longer `embedded_with`, re-embed again
       (on commit); with `then_embed`, queue a re-embed now (a temporary
       embedding failure left these passages lexical only).
    """
    with transaction.atomic():
        locked = _lock_for_swap(job, attempt)
        if locked is None:
            return
        KnowledgeEmbedding.objects.filter(chunk__source=locked).delete()
        chunk_ids = passages(locked)
        _store_vectors(chunk_ids, vectors, shares, model)
        Source.objects.filter(pk=locked.pk).update(
            **source_fields, embedding_model=model, updated=now, revision=F("revision") + 1
        )
        _segment_on_commit(locked, chunk_ids, vectors, shares, model)
        _job_done(job, now=now, passages=len(chunk_ids), step=_done_step(len(chunk_ids), model))
        _follow_model_change(locked.campaign, embedded_with)
        if then_embed:
            _enqueue(_job_for(locked, kind=IndexJob.Kind.EMBED))


def _segment_on_commit(
    source: KnowledgeSource, chunk_ids: list[int], vectors: list[bytes], shares, model: str
) -> None:
    """Writes the source's new vector segment from the vectors in hand, once
    they are live, so no reader decodes them from the database. After the
    campaign's last job in flight, also its merged library file and word
    counts, so a fresh process's first turn only maps and reads files."""
    version = Source.objects.filter(pk=source.pk).values_list("pk", "revision", "updated").get()

    def store() -> None:
        # With pgvector the vectors are searched in the database: no files.
        mapped = not pgvector.enabled()
        try:
            if vectors and mapped:
                segments.store(version, model, chunk_ids, vectors, shares)
            else:
                segments.forget(source.pk)
            busy = IndexJob.objects.filter(source__campaign_id=source.campaign_id, state__in=IndexJob.ACTIVE).exists()
            if not busy:
                if model and mapped:
                    segments.load(source.campaign_id, model)
                termstats.keep(source.campaign_id)
        except OSError:
            # A cache: the next reader builds what is missing from the database.
            log.exception("Could not write the library files of campaign %s", source.campaign_id)

    transaction.on_commit(store)


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


def _replace_passages(source: KnowledgeSource, passages, *, entry_ids: dict[int, int] | None = None) -> list[int]:
    """Replaces the source's passages with these, with their lexical index
    data; returns their ids in passage order. `entry_ids` maps the entries
    the passages name to their rows, for a book stored by this swap."""
    KnowledgeChunk.objects.filter(source=source).only("pk").delete()
    entry = (lambda p: entry_ids.get(p.entry)) if entry_ids is not None else (lambda p: p.entry)
    lexical.insert(
        rows=[(source.pk, source.campaign_id, p.index, p.heading_path, p.text, p.token_count, entry(p)) for p in passages]
    )
    by_index = dict(KnowledgeChunk.objects.filter(source=source).values_list("index", "pk"))
    return [by_index[p.index] for p in passages]


def _same_passages(source: KnowledgeSource, ids: list[int]) -> list[int]:
    """The ids of the passages a re-embed job embedded, if they are still the
    source's live ones; if they were rebuilt meanwhile, that job embedded them."""
    if sorted(KnowledgeChunk.objects.filter(source=source).values_list("pk", flat=True)) != sorted(ids):
        raise _Abandoned
    return ids


def _store_vectors(chunk_ids: list[int], vectors: list[bytes], shares: list[float | None], model: str) -> None:
    if not vectors:
        return
    dimensions = len(vectors[0]) // embeddings.DTYPE.itemsize
    KnowledgeEmbedding.objects.bulk_create(
        [
            KnowledgeEmbedding(chunk_id=chunk_id, model=model, dimensions=dimensions, vector=vector, neutral_share=share)
            for chunk_id, vector, share in zip(chunk_ids, vectors, shares, strict=True)
        ],
        batch_size=BULK_BATCH,
    )
    pgvector.store(chunk_ids, vectors, model)


def _done_step(passages: int, model: str) -> str:
    return f"{passages} passages" + (f", embedded with {model}" if model else ", lexical only")


def _job_done(job: IndexJob, *, now: datetime, passages: int, step: str) -> None:
    IndexJob.objects.filter(pk=job.pk).update(
        state=IndexJob.State.DONE, progress=100, heartbeat=now, finished=now,
        passages=passages, step=step[:200], error="",
    )
    batches_clear(job.pk)


def _follow_model_change(campaign: Campaign, embedded_with: str) -> None:
    """If the campaign's model changed while the job ran, re-embed again."""
    if embeddings.model_for(campaign) != embedded_with:
        transaction.on_commit(lambda: embeddings_refresh(campaign_ids=[campaign.pk]))


def _job_release(job: IndexJob, attempt: int, error: str, *, retry_at: datetime) -> None:
    """Back to the queue until its retry, dated then, so the sweep does not
    take the wait for a lost message."""
    IndexJob.objects.filter(pk=job.pk, state=IndexJob.State.RUNNING, attempts=attempt).update(
        state=IndexJob.State.QUEUED, heartbeat=retry_at, error=error, step="Waiting to retry after an endpoint error"
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
            batches_clear(job.pk)


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
    campaign_ids = (
        Source.objects.filter(index_state=Source.IndexState.READY)
        .filter(campaign_id__in=campaigns_using(profile))
        .values_list("campaign_id", flat=True)
        .distinct()
    )
    return embeddings_refresh(campaign_ids=list(campaign_ids))


def campaigns_using(profile: EndpointProfile):
    """The campaigns that may use this profile: by choice, or by default
    (all that chose none: it may just have stopped being the default, and a
    refresh of a campaign whose model did not change does nothing), as a
    query of their ids, read where it is used."""
    uses = Q(endpoint_id=profile.pk) | Q(endpoint__isnull=True)
    return Campaign.objects.filter(uses).values_list("pk", flat=True)
