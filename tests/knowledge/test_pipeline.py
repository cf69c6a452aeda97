"""The import pipeline: upload to ready, idempotent tasks, the swap, recovery.

Tasks run eagerly where the test commits (tests/conftest.py); embeddings go
to the loopback demo model server.
"""

import os
import socket
import subprocess
import sys
from datetime import timedelta

import numpy as np
import openai
import pytest
from django.utils import timezone

from demomodel.embedding import DIMENSIONS
from endpoints import embeddings
from endpoints.embeddings import for_retrieval
from endpoints.models import EmbeddingCalibration
from knowledge import lexical, retrieval, services, tasks
from knowledge.retrieval.library import library_for
from knowledge.models import (
    IndexJob,
    KnowledgeChunk,
    KnowledgeEmbedding,
    KnowledgeSource,
)
from knowledge.query import QueryInputs
from lifecycle import policy
from tests.factories import (
    CampaignFactory,
    EndpointProfileFactory,
    IndexJobFactory,
    KnowledgeSourceFactory,
)

OLD = "# Westhaven\n\n## The Harbour\n\nThe old harbour smells of tar."
NEW = "# Westhaven\n\n## The Harbour\n\nThe new harbour smells of paint.\n\n## Tides\n\nTides run high."


def upload(campaign, text, captured, *, filename="westhaven.md", **options):
    with captured(execute=True):
        result = services.sources_import(campaign=campaign, files=[(filename, text.encode())], **options)
    assert not result.problems, result.problems
    source = result.created[0]
    source.refresh_from_db()
    return source


def passages(source):
    return list(KnowledgeChunk.objects.filter(source=source).order_by("index").values_list("heading_path", "text"))


def found(campaign, *terms):
    return lexical.search(campaign_id=campaign.pk, terms=list(terms))


def test_an_upload_is_chunked_indexed_and_ready(campaign, django_capture_on_commit_callbacks):
    source = upload(campaign, NEW, django_capture_on_commit_callbacks)
    assert source.index_state == KnowledgeSource.IndexState.READY
    assert passages(source) == [
        ("Westhaven > The Harbour", "The new harbour smells of paint."),
        ("Westhaven > Tides", "Tides run high."),
    ]
    assert source.passage_count == 2 and source.token_count > 0
    job = source.jobs.get()
    assert job.state == IndexJob.State.DONE and job.progress == 100 and job.attempts == 1
    assert found(campaign, "paint")


def test_without_an_embedding_model_a_source_is_ready_lexical_only(campaign, django_capture_on_commit_callbacks):
    source = upload(campaign, NEW, django_capture_on_commit_callbacks)
    assert source.index_state == KnowledgeSource.IndexState.READY
    assert source.embedding_model == ""
    assert not KnowledgeEmbedding.objects.exists()


def test_with_an_embedding_model_every_passage_gets_a_float32_vector_named_by_model(
    embedded_campaign, model, django_capture_on_commit_callbacks
):
    source = upload(embedded_campaign, NEW, django_capture_on_commit_callbacks)
    assert source.index_state == KnowledgeSource.IndexState.READY and source.embedding_model == "demo-embed"
    vectors = KnowledgeEmbedding.objects.filter(chunk__source=source)
    assert vectors.count() == 2
    assert {(v.model, v.dimensions, len(bytes(v.vector))) for v in vectors} == {("demo-embed", DIMENSIONS, DIMENSIONS * 4)}
    first = vectors.order_by("chunk__index").first()
    expected = model.requests()[-1]
    assert expected["path"] == "/v1/embeddings" and len(expected["input"]) == 2
    assert np.isclose(np.linalg.norm(embeddings.from_bytes(first.vector)), 1.0, atol=1e-5)


def test_running_the_task_twice_changes_nothing(campaign, django_capture_on_commit_callbacks):
    source = upload(campaign, NEW, django_capture_on_commit_callbacks)
    job = source.jobs.get()
    before = list(KnowledgeChunk.objects.filter(source=source).values_list("pk", "text"))
    tasks.index_job.delay(job.pk)
    tasks.index_job.delay(job.pk)
    job.refresh_from_db()
    assert list(KnowledgeChunk.objects.filter(source=source).values_list("pk", "text")) == before
    assert job.attempts == 1 and job.state == IndexJob.State.DONE
    assert IndexJob.objects.count() == 1


def test_a_duplicate_delivery_of_a_running_job_with_a_live_heartbeat_does_nothing(campaign):
    source = KnowledgeSourceFactory(campaign=campaign, content=OLD)
    job = IndexJobFactory(source=source, state=IndexJob.State.RUNNING, heartbeat=timezone.now(), attempts=1)
    assert services.job_run(job_id=job.pk, now=timezone.now()) is None
    assert not KnowledgeChunk.objects.exists()


def test_the_same_content_twice_is_reported_and_not_stored_twice(campaign, django_capture_on_commit_callbacks):
    upload(campaign, NEW, django_capture_on_commit_callbacks, filename="first.md")
    with django_capture_on_commit_callbacks(execute=True):
        result = services.sources_import(campaign=campaign, files=[("copy.md", NEW.replace("\n", "\r\n").encode())])
    assert result.created == []
    assert result.duplicates == ["copy.md: the same text is already in this library as “Westhaven”."]
    assert KnowledgeSource.objects.count() == 1 and IndexJob.objects.count() == 1


def test_the_same_content_in_another_campaign_is_a_separate_source(campaign, alice, django_capture_on_commit_callbacks):
    upload(campaign, NEW, django_capture_on_commit_callbacks)
    upload(CampaignFactory(owner=alice, endpoint=campaign.endpoint), NEW, django_capture_on_commit_callbacks)
    assert KnowledgeSource.objects.count() == 2


def test_old_passages_stay_searchable_until_the_new_ones_are_swapped_in(campaign, library):
    """The clock is read at every heartbeat, so it is where this test looks
    at what a turn could find while the re-index is under way."""
    source = library(campaign, OLD)
    KnowledgeSource.objects.filter(pk=source.pk).update(content=NEW, sha256=services.content_hash(NEW))
    source.refresh_from_db()
    job = services.source_reindex(source=source)
    seen_during = []

    def clock():
        seen_during.append((KnowledgeSource.objects.get(pk=source.pk).index_state, len(found(campaign, "tar")),
                            len(found(campaign, "paint"))))
        return timezone.now()

    services.job_run(job_id=job.pk, now=timezone.now(), clock=clock)
    assert seen_during and all(seen == ("ready", 1, 0) for seen in seen_during[:-1])
    assert found(campaign, "tar") == [] and len(found(campaign, "paint")) == 1
    assert [text for _, text in passages(source)] == ["The new harbour smells of paint.", "Tides run high."]


def test_a_broken_embedding_model_costs_only_the_semantic_half(embedded_campaign, model, library):
    source = library(embedded_campaign, OLD)
    old = passages(source)
    model.script_embeddings({"status": 404})
    source = services.source_index_now(KnowledgeSource.objects.get(pk=source.pk))
    assert source.index_state == KnowledgeSource.IndexState.READY
    assert source.error.startswith("Semantic search is off for this file:")
    assert "does not know the embedding model" in source.error
    assert passages(source) == old and not source.embedding_model
    assert len(found(embedded_campaign, "tar")) == 1
    assert source.jobs.filter(kind=IndexJob.Kind.EMBED).count() == 0, "a permanent failure is not retried"


def test_a_temporary_endpoint_failure_is_retried_and_then_succeeds(
    embedded_campaign, model, django_capture_on_commit_callbacks
):
    model.script_embeddings({"status": 503}, {"status": 500})
    source = upload(embedded_campaign, NEW, django_capture_on_commit_callbacks)
    index = source.jobs.get(kind=IndexJob.Kind.INDEX)
    embed = source.jobs.get(kind=IndexJob.Kind.EMBED)
    assert source.index_state == KnowledgeSource.IndexState.READY and not source.error
    assert index.attempts == 1 and index.state == IndexJob.State.DONE, "the passages went live at once"
    assert embed.attempts == 2 and embed.state == IndexJob.State.DONE
    assert KnowledgeEmbedding.objects.count() == 2 and source.embedding_model == "demo-embed"


def test_an_embedding_endpoint_that_keeps_failing_leaves_the_source_ready_lexically(
    embedded_campaign, model, django_capture_on_commit_callbacks
):
    model.script_embeddings(*[{"status": 503}] * (services.MAX_RETRIES + 2))
    source = upload(embedded_campaign, NEW, django_capture_on_commit_callbacks)
    embed = source.jobs.get(kind=IndexJob.Kind.EMBED)
    assert source.index_state == KnowledgeSource.IndexState.READY
    assert "failed with an error (503)" in source.error
    assert embed.state == IndexJob.State.FAILED and embed.attempts == services.MAX_RETRIES + 1
    assert "gave up after" in embed.error
    assert KnowledgeChunk.objects.count() == 2 and len(found(embedded_campaign, "harbour")) >= 1


def test_a_permanent_endpoint_failure_is_not_retried(embedded_campaign, model, django_capture_on_commit_callbacks):
    model.script_embeddings({"status": 401})
    source = upload(embedded_campaign, NEW, django_capture_on_commit_callbacks)
    assert source.index_state == KnowledgeSource.IndexState.READY
    assert "Semantic search is off for this file" in source.error and "refused the API key (401)" in source.error
    assert source.jobs.get().attempts == 1


def test_a_job_left_running_by_a_dead_worker_is_requeued_and_finishes(campaign, library, django_capture_on_commit_callbacks):
    source = library(campaign, OLD)
    KnowledgeSource.objects.filter(pk=source.pk).update(content=NEW, sha256=services.content_hash(NEW))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    job = IndexJobFactory(
        source=source, state=IndexJob.State.RUNNING, attempts=1, heartbeat=timezone.now(),
        content_sha256=services.content_hash(NEW), worker=f"{socket.gethostname()}:{dead.stdout.strip()}",
    )
    assert len(found(campaign, "tar")) == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert services.jobs_recover(now=timezone.now()) == [job.pk]
    job.refresh_from_db()
    assert job.state == IndexJob.State.DONE and job.attempts == 2
    assert found(campaign, "tar") == [] and len(found(campaign, "paint")) == 1


def test_a_job_with_a_live_worker_and_a_fresh_heartbeat_is_left_alone(campaign):
    source = KnowledgeSourceFactory(campaign=campaign)
    job = IndexJobFactory(source=source, state=IndexJob.State.RUNNING, attempts=1, heartbeat=timezone.now(),
                          worker=f"{socket.gethostname()}:{os.getpid()}")
    assert services.jobs_recover(now=timezone.now()) == []
    job.refresh_from_db()
    assert job.state == IndexJob.State.RUNNING


def test_a_job_whose_heartbeat_went_stale_can_be_claimed_again(campaign):
    source = KnowledgeSourceFactory(campaign=campaign, content=OLD)
    long_ago = timezone.now() - policy.STALE_AFTER - timedelta(seconds=1)
    job = IndexJobFactory(source=source, state=IndexJob.State.RUNNING, attempts=1, heartbeat=long_ago,
                          worker="elsewhere:1")
    services.job_run(job_id=job.pk, now=timezone.now())
    job.refresh_from_db()
    assert job.state == IndexJob.State.DONE and job.attempts == 2
    assert passages(source) == [("Westhaven > The Harbour", "The old harbour smells of tar.")]


def test_a_cancelled_job_stores_nothing(campaign):
    source = KnowledgeSourceFactory(campaign=campaign, content=OLD)
    job = IndexJobFactory(source=source)

    def clock():
        services.job_cancel(job=job, now=timezone.now())
        return timezone.now()

    services.job_run(job_id=job.pk, now=timezone.now(), clock=clock)
    job.refresh_from_db()
    source.refresh_from_db()
    assert job.state == IndexJob.State.CANCELLED
    assert source.index_state == KnowledgeSource.IndexState.FAILED and "cancelled" in source.error
    assert not KnowledgeChunk.objects.exists()


def test_a_source_deleted_while_indexing_leaves_nothing_behind(campaign):
    source = KnowledgeSourceFactory(campaign=campaign, content=OLD)
    job = IndexJobFactory(source=source)

    def clock():
        KnowledgeSource.objects.filter(pk=source.pk).delete()
        return timezone.now()

    services.job_run(job_id=job.pk, now=timezone.now(), clock=clock)
    assert not KnowledgeChunk.objects.exists() and not IndexJob.objects.exists()


def test_one_source_has_at_most_one_active_job(campaign, library):
    source = library(campaign, OLD)
    first = services.source_reindex(source=source)
    second = services.source_reindex(source=source)
    assert first.pk == second.pk
    assert source.jobs.filter(state__in=IndexJob.ACTIVE).count() == 1


def test_changing_the_embedding_model_re_embeds_and_never_mixes_models(
    embedded_campaign, model, django_capture_on_commit_callbacks
):
    source = upload(embedded_campaign, NEW, django_capture_on_commit_callbacks)
    chunk_ids = set(KnowledgeChunk.objects.filter(source=source).values_list("pk", flat=True))
    other = EndpointProfileFactory(base_url=model.base_url, embedding_model="demo-embed-v2")
    with django_capture_on_commit_callbacks(execute=True):
        embedded_campaign.endpoint = other
        embedded_campaign.save()
    source.refresh_from_db()
    assert source.embedding_model == "demo-embed-v2"
    assert set(KnowledgeEmbedding.objects.values_list("model", flat=True)) == {"demo-embed-v2"}
    assert set(KnowledgeChunk.objects.filter(source=source).values_list("pk", flat=True)) == chunk_ids
    assert library_for(embedded_campaign.pk, "demo-embed").size == 0
    library = library_for(embedded_campaign.pk, "demo-embed-v2")
    assert set(library.vectors_for(chunk_ids)) == chunk_ids
    assert (library.size, library.dimensions) == (2, DIMENSIONS)


def test_editing_the_profiles_embedding_model_re_embeds_its_campaigns(
    embedded_campaign, model, django_capture_on_commit_callbacks
):
    source = upload(embedded_campaign, NEW, django_capture_on_commit_callbacks)
    profile = embedded_campaign.endpoint
    with django_capture_on_commit_callbacks(execute=True):
        profile.embedding_model = "demo-embed-v3"
        profile.save()
    source.refresh_from_db()
    assert source.embedding_model == "demo-embed-v3"
    assert source.jobs.filter(kind=IndexJob.Kind.EMBED, state=IndexJob.State.DONE).count() == 1


def test_vectors_are_only_searched_for_enabled_ready_sources_of_the_campaign(
    embedded_campaign, alice, django_capture_on_commit_callbacks
):
    source = upload(embedded_campaign, NEW, django_capture_on_commit_callbacks)
    upload(CampaignFactory(owner=alice, endpoint=embedded_campaign.endpoint), OLD, django_capture_on_commit_callbacks)
    library = library_for(embedded_campaign.pk, "demo-embed")
    (query, _), *_ = library.vectors_for(source.chunks.values_list("pk", flat=True)).values()
    assert library.size == 2 and len(library.top(query, 10)) == 2
    KnowledgeSource.objects.filter(pk=source.pk).update(enabled=False)
    library = library_for(embedded_campaign.pk, "demo-embed")
    assert library.top(query, 10) == []


def test_always_include_is_refused_outside_canon(campaign):
    with pytest.raises(services.ImportRefused):
        services.source_create(campaign=campaign, filename="a.md", text="Text.", classification="reference",
                               always_include=True)
    assert not KnowledgeSource.objects.exists()


def test_index_now_indexes_in_process_without_a_worker(campaign):
    source = services.source_create(campaign=campaign, filename="a.md", text=NEW, enqueue=False)
    assert source.index_state == KnowledgeSource.IndexState.PENDING
    source = services.source_index_now(source)
    assert source.index_state == KnowledgeSource.IndexState.READY and source.passage_count == 2


def test_scripted_embedding_failures_leave_chat_alone(model, endpoint):
    """The demo server's embedding script is separate from its chat script."""
    from endpoints.client import client_for

    client = client_for(endpoint)
    model.script_embeddings({"status": 500})
    with pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="demo-embed", input=["x"])
    assert client.embeddings.create(model="demo-embed", input=["x"]).data
    assert client.chat.completions.create(model="demo-narrator", messages=[{"role": "user", "content": "hi"}]).choices


def test_the_turn_says_why_semantic_retrieval_is_off(embedded_campaign, model, library):
    retrieval.clear_cache()  # another test's library may sit under the same ids
    EmbeddingCalibration.objects.create(model="demo-embed", floor=0.2, measured_at=timezone.now())
    model.script_embeddings({"status": 404})
    library(embedded_campaign, OLD)
    result = retrieval.retrieve(
        campaign_id=embedded_campaign.pk, **for_retrieval(embedded_campaign.endpoint),
        query=QueryInputs.build(state={"scene": {"summary": "Tar on the quay."}}, recent=["I smell tar."], persona_name=""),
    )
    assert "lexical only" in result.semantic_note and "does not know the embedding model" in result.semantic_note
