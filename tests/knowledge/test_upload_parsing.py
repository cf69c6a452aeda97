"""An upload is read by its index job, in the worker: run twice it stores
the book once, a duplicate or an always-include outside Canon found only
once the file is read fails the job with the reason, and nothing else."""

import json
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from knowledge import services
from knowledge.models import IndexJob, KnowledgeChunk, KnowledgeSource, LoreEntry

HX = {"HTTP_HX_REQUEST": "true"}
WESTHAVEN = (Path(__file__).parent / "lorebooks" / "data" / "st_westhaven.json").read_bytes()


def post(reader, campaign, name, data, *, captured=None, **fields):
    form = {"files": [SimpleUploadedFile(name, data)], "classification": "", "visibility": "visible", **fields}
    url = reverse("library_upload", kwargs={"pk": campaign.pk})
    if captured is None:
        return reader.post(url, form, **HX)
    with captured(execute=True):
        return reader.post(url, form, **HX)


def test_the_job_run_twice_reads_and_stores_the_book_once(reader, campaign):
    post(reader, campaign, "westhaven.json", WESTHAVEN)
    job = IndexJob.objects.get()
    first = services.job_run(job_id=job.pk, now=timezone.now())
    again = services.job_run(job_id=job.pk, now=timezone.now())
    assert first.state == "done" and again is None
    source = KnowledgeSource.objects.get()
    assert source.index_state == "ready" and source.classification == "canon" and not source.upload
    assert LoreEntry.objects.count() == 6 and KnowledgeChunk.objects.filter(entry__isnull=False).exists()
    assert source.sha256 == services.content_hash(source.content) == source.indexed_sha256


def test_the_same_book_in_other_bytes_fails_as_a_duplicate_once_read(
    reader, campaign, django_capture_on_commit_callbacks
):
    post(reader, campaign, "westhaven.json", WESTHAVEN, captured=django_capture_on_commit_callbacks)
    again = json.dumps(json.loads(WESTHAVEN), indent=4).encode()
    post(reader, campaign, "copy.json", again, captured=django_capture_on_commit_callbacks)
    copy = KnowledgeSource.objects.get(original_filename="copy.json")
    assert copy.index_state == "failed" and "is already in this library" in copy.error
    assert not copy.entries.exists() and LoreEntry.objects.count() == 6


def test_always_include_by_content_is_canon_for_a_book_and_refused_for_a_text(
    campaign, django_capture_on_commit_callbacks
):
    """The library's form refuses always-include "by file"; a caller of the
    service that asks for it gets the rule applied once the file is read."""
    files = [("westhaven.json", WESTHAVEN), ("notes.md", b"# Notes\n\nThe bell tolls.")]
    with django_capture_on_commit_callbacks(execute=True):
        services.sources_upload(campaign=campaign, files=files, always_include=True)
    book = KnowledgeSource.objects.get(original_filename="westhaven.json")
    text = KnowledgeSource.objects.get(original_filename="notes.md")
    assert book.index_state == "ready" and book.always_include and book.classification == "canon"
    assert text.index_state == "failed" and "Only Canon sources can be always included" in text.error
    assert not text.always_include and not KnowledgeChunk.objects.filter(source=text).exists()


def test_vectors_count_in_the_stored_bytes(alice, client, embedded_campaign, django_capture_on_commit_callbacks):
    client.force_login(alice)
    post(client, embedded_campaign, "notes.md", b"# Notes\n\nThe bell tolls.", captured=django_capture_on_commit_callbacks,
         classification="reference")
    source = KnowledgeSource.objects.get()
    assert source.index_state == "ready" and source.embedding_model
    vector = source.chunks.get().embeddings.get()
    assert source.stored_bytes > len(bytes(vector.vector)) + len(source.content)


def test_an_unread_upload_shows_no_settings_and_its_row_comes_back_whole_once_read(reader, campaign):
    """Before the worker reads a file, its class and title are guesses; the row
    offers none of them (a Save would store the guess) and polls itself, and
    once read it comes back whole with what the worker found."""
    post(reader, campaign, "westhaven.json", WESTHAVEN)
    source = KnowledgeSource.objects.get()
    row_url = reverse("library", kwargs={"pk": campaign.pk}) + f"?row={source.pk}"
    waiting = reader.get(reverse("library", kwargs={"pk": campaign.pk})).content.decode()
    assert f'hx-get="{row_url}"' in waiting and "a worker is reading it" in waiting
    assert 'name="classification"' not in waiting.split('id="upload-form"')[1].split("</form>", 1)[1]
    services.job_run(job_id=IndexJob.objects.get().pk, now=timezone.now())
    row = reader.get(row_url, **HX).content.decode()
    assert 'value="canon" selected' in row and "SillyTavern World Info, 6 entries" in row
    assert 'hx-trigger="every 2s"' not in row.split("<form", 1)[0]
    KnowledgeSource.objects.all().delete()
    assert reader.get(row_url, **HX).content == b""
