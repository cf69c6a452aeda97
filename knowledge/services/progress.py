"""A running index job's progress: its beat, and the batches of vectors it has committed.

Its own module because this is what lets a job survive its worker: each
batch of vectors is committed with the job's `committed` count, in one
transaction that only the attempt owning the job can make, so the attempt
that takes over from a dead worker embeds only what is missing. Passages
themselves are cut again (cheap and deterministic); a committed batch is
reused only when its texts and model are exactly those asked for now.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import transaction

from endpoints import embeddings
from endpoints.models import EndpointProfile

from ..models import IndexJob, IndexJobBatch

log = logging.getLogger(__name__)


class _Abandoned(Exception):
    """The job was cancelled or taken over while this process worked on it."""


def _beat(job: IndexJob, attempt: int, *, now: datetime, progress: int, step: str, **changes) -> None:
    """Progress and heartbeat in one conditional UPDATE; raises _Abandoned
    when the job is no longer this attempt's (cancelled, or taken over)."""
    alive = IndexJob.objects.filter(pk=job.pk, state=IndexJob.State.RUNNING, attempts=attempt).update(
        heartbeat=now, progress=progress, step=step[:200], **changes
    )
    if not alive:
        raise _Abandoned


def _digest(texts: Sequence[str]) -> str:
    hashed = hashlib.sha256()
    for text in texts:
        hashed.update(text.encode())
        hashed.update(b"\0")
    return hashed.hexdigest()


def _split(blob: bytes, count: int) -> list[bytes]:
    width = len(blob) // count
    return [blob[n * width : (n + 1) * width] for n in range(count)]


def committed_vectors(job: IndexJob, model: str, inputs: Sequence[str]) -> list[bytes]:
    """The vectors of the leading batches a previous attempt committed for
    these very inputs and this model; empty when there are none."""
    vectors: list[bytes] = []
    stored = IndexJobBatch.objects.filter(job=job, model=model, start__lt=job.committed).order_by("start")
    for batch in stored.only("start", "size", "inputs_sha256", "vectors"):
        texts = inputs[batch.start : batch.start + batch.size]
        if batch.start != len(vectors) or len(texts) != batch.size or _digest(texts) != batch.inputs_sha256:
            break
        vectors += _split(bytes(batch.vectors), batch.size)
    return vectors


def embed_resuming(
    job: IndexJob, attempt: int, clock: Callable[[], datetime], profile: EndpointProfile | None, inputs: list[str],
) -> list[bytes]:
    """Every input's vector, embedding only what no earlier attempt committed.

    1. Reuse the committed leading batches (committed_vectors); drop any
       batch after them, which a changed text or model has made useless.
    2. Embed the rest a batch at a time; each batch is committed with the
       job's `committed` count and heartbeat, by this attempt only.
    """
    if profile is None or not inputs:
        return []
    model = embeddings.model_of(profile)
    size = embeddings.BATCH_SIZE
    vectors = committed_vectors(job, model, inputs)
    IndexJobBatch.objects.filter(job=job, start__gte=len(vectors)).delete()
    resumed = f" (resumed after {len(vectors)})" if vectors else ""
    if vectors:
        log.info("Index job %s resumes after %s of %s passages", job.pk, len(vectors), len(inputs))
    _beat(job, attempt, now=clock(), progress=10 + 85 * len(vectors) // len(inputs), committed=len(vectors),
          step=f"Embedding with {model}: {len(vectors)} of {len(inputs)} passages{resumed}")
    for start in range(len(vectors), len(inputs), size):
        texts = inputs[start : start + size]
        fresh = list(embeddings.embed(profile, texts, batch_size=size))
        with transaction.atomic():
            done = start + len(texts)
            _beat(job, attempt, now=clock(), progress=10 + 85 * done // len(inputs), committed=done,
                  step=f"Embedding with {model}: {done} of {len(inputs)} passages{resumed}")
            IndexJobBatch.objects.create(job=job, start=start, size=len(texts), model=model,
                                         inputs_sha256=_digest(texts), vectors=b"".join(fresh))
        vectors += fresh
    return vectors


def batches_clear(job_id: int) -> None:
    """A job that ended needs no batches: its vectors are live, or useless."""
    IndexJobBatch.objects.filter(job_id=job_id).delete()
