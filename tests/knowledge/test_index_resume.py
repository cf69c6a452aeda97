"""An import interrupted mid-embedding resumes where its batches were committed.

The worker's death is a BaseException raised from the embedding call after
some batches (as SIGKILL would stop it, nothing of the job's own handling
runs); the job is left running, and the next attempt takes it over once
its heartbeat is stale. It must embed only the batches that were never
committed, and end with every passage exactly once.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from endpoints import embeddings
from knowledge import services
from knowledge.models import IndexJob, IndexJobBatch, KnowledgeChunk, KnowledgeEmbedding
from lifecycle import policy

BATCH = 4
LORE = "\n\n".join(f"# Harbour {n}\n\nThe tide bell of harbour {n} rings at the {n}th hour." for n in range(18))


class Killed(BaseException):
    """The worker's process ending mid-job."""


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(embeddings, "BATCH_SIZE", BATCH)


def _embedding_inputs(model) -> list[list[str]]:
    return [r["input"] for r in model.requests() if r["path"] == "/v1/embeddings" and "Harbour" in str(r["input"])]


def test_an_interrupted_import_resumes_after_its_committed_batches(embedded_campaign, model, monkeypatch, small_batches):
    source = services.source_create(campaign=embedded_campaign, filename="harbours.md", text=LORE, enqueue=False)
    job = IndexJob.objects.get(source=source)
    real_embed, calls = embeddings.embed, []

    def dies_on_the_third_batch(profile, texts, **kwargs):
        calls.append(len(texts))
        if len(calls) == 3:
            raise Killed
        return real_embed(profile, texts, **kwargs)

    monkeypatch.setattr(embeddings, "embed", dies_on_the_third_batch)
    with pytest.raises(Killed):
        services.job_run(job_id=job.pk, now=timezone.now())
    job.refresh_from_db()
    assert (job.state, job.committed, job.attempts) == (IndexJob.State.RUNNING, 2 * BATCH, 1)
    assert IndexJobBatch.objects.filter(job=job).count() == 2
    assert not KnowledgeChunk.objects.filter(source=source).exists(), "nothing is live before the swap"

    monkeypatch.setattr(embeddings, "embed", real_embed)
    first_attempt = _embedding_inputs(model)
    model.clear_requests()
    later = timezone.now() + policy.STALE_AFTER + timedelta(seconds=1)
    services.job_run(job_id=job.pk, now=later, clock=lambda: later)

    job.refresh_from_db()
    source.refresh_from_db()
    passages = list(KnowledgeChunk.objects.filter(source=source).order_by("index").values_list("index", "text"))
    resumed = _embedding_inputs(model)
    assert job.state == IndexJob.State.DONE and job.attempts == 2
    assert [i for i, _ in passages] == list(range(source.passage_count)) and source.passage_count > 3 * BATCH
    assert len({text for _, text in passages}) == len(passages), "no passage twice"
    assert KnowledgeEmbedding.objects.filter(chunk__source=source).count() == len(passages), "none missing"
    done_before = {text for batch in first_attempt for text in batch}
    assert not done_before & {text for batch in resumed for text in batch}, "no committed batch embedded again"
    assert sum(len(batch) for batch in resumed) == len(passages) - 2 * BATCH
    assert not IndexJobBatch.objects.filter(job=job).exists(), "the batches go with the swap"


def test_batches_made_for_other_texts_are_not_reused(embedded_campaign, model, small_batches):
    """A batch is reused only for the very texts it was made from."""
    source = services.source_create(campaign=embedded_campaign, filename="harbours.md", text=LORE, enqueue=False)
    job = IndexJob.objects.get(source=source)
    IndexJob.objects.filter(pk=job.pk).update(committed=BATCH)
    IndexJobBatch.objects.create(job=job, start=0, size=BATCH, model="demo-embed", inputs_sha256="0" * 64,
                                 vectors=b"\0" * 4 * BATCH)
    services.job_run(job_id=job.pk, now=timezone.now())
    source.refresh_from_db()
    assert sum(len(batch) for batch in _embedding_inputs(model)) == source.passage_count
    assert IndexJob.objects.get(pk=job.pk).state == IndexJob.State.DONE
