"""A big lorebook (issue 23: 100,000 entries held a web thread for minutes,
made a 129 MB source page and an 86 MB export built whole): the upload only
stores the file, a worker reads it, the source page shows a page of entries
and the export streams. Shrunk to 5,000 entries, the same behaviour."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge.models import IndexJob, KnowledgeChunk, KnowledgeSource, LoreEntry
from knowledge.selectors import ENTRIES_PER_PAGE

HX = {"HTTP_HX_REQUEST": "true"}
ENTRIES = 5000
TEXT = "The harbour chain of {i} is raised at dusk, and the lamplighters of the guild walk the quay twice."


def big_book() -> dict:
    return {"name": "Big Book", "entries": {
        str(i): {"uid": i, "key": [f"place{i}"], "comment": f"Place {i}", "content": TEXT.format(i=i),
                 **({"depth": 2} if i % 7 == 0 else {})}
        for i in range(ENTRIES)
    }}


def post_book(reader, campaign, data: bytes):
    files = [SimpleUploadedFile("big.json", data)]
    return reader.post(reverse("library_upload", kwargs={"pk": campaign.pk}),
                       {"files": files, "classification": "", "visibility": "visible"}, **HX)


@pytest.fixture
def big(reader, campaign, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post_book(reader, campaign, json.dumps(big_book()).encode())
    return KnowledgeSource.objects.get(campaign=campaign)


def test_the_upload_request_stores_the_file_and_leaves_the_reading_to_the_job(reader, campaign):
    data = json.dumps(big_book()).encode()
    response = post_book(reader, campaign, data)  # the job would run on commit, in a worker
    assert response.status_code == 200 and "Imported 1 file" in response.content.decode()
    source = KnowledgeSource.objects.get(campaign=campaign)
    assert bytes(source.upload) == data and source.index_state == "pending" and not source.format
    assert not LoreEntry.objects.exists() and not KnowledgeChunk.objects.exists()
    assert IndexJob.objects.get(source=source).state == "queued"


def test_the_job_reads_the_book_and_reports_it(reader, campaign, big):
    assert big.index_state == "ready" and big.format == "SillyTavern World Info" and not big.upload
    assert big.entries.count() == ENTRIES and big.passage_count == ENTRIES
    assert big.stored_bytes / big.upload_bytes < 6
    assert f"SillyTavern World Info, {ENTRIES} entries" in big.metadata["report"]


def test_the_source_page_shows_one_page_of_entries_and_a_count(reader, campaign, big):
    url = reverse("source_detail", kwargs={"pk": campaign.pk, "source_id": big.pk})
    first = reader.get(url).content.decode()
    assert len(first) < 400_000 and first.count('class="card entry') == ENTRIES_PER_PAGE
    assert f"Entries 1–100 of {ENTRIES}" in first and "Place 99<" in first and "Place 100<" not in first
    last = reader.get(url + f"?page={ENTRIES // ENTRIES_PER_PAGE}").content.decode()
    assert f"Place {ENTRIES - 1}<" in last and 'rel="next"' not in last


@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_the_export_streams_every_entry_with_its_settings(reader, campaign, big):
    response = reader.get(reverse("source_export", kwargs={"pk": campaign.pk, "source_id": big.pk}))
    assert response.streaming
    document = json.loads(b"".join(response))
    assert len(document["entries"]) == ENTRIES and document["name"] == "Big Book"
    assert document["entries"]["7"]["depth"] == 2 and document["entries"]["8"]["depth"] == 4
    assert document["entries"]["8"]["probability"] == 100 and document["entries"]["8"]["content"] == TEXT.format(i=8)
