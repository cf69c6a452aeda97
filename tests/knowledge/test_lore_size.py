"""Lore size (issue 23): a source is measured by what it would take stored,
not by its upload; a file that would go over a limit fails its job with the
reason, shown on the library page, and leaves nothing but the file."""

import html
import json

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from knowledge.models import KnowledgeChunk, KnowledgeSource, LoreEntry
from tests.factories import CampaignFactory

HX = {"HTTP_HX_REQUEST": "true"}


def upload(reader, campaign, captured, name, data: bytes, classification="reference"):
    files = [SimpleUploadedFile(name, data)]
    with captured(execute=True):
        reader.post(reverse("library_upload", kwargs={"pk": campaign.pk}),
                    {"files": files, "classification": classification, "visibility": "visible"}, **HX)
    return KnowledgeSource.objects.filter(campaign=campaign).latest("pk")


def sections(count: int, prefix: str = "note") -> bytes:
    return "".join(f"# {prefix} {i}\nword{i}\n" for i in range(count)).encode()


def library_page(reader, campaign) -> str:
    return html.unescape(reader.get(reverse("library", kwargs={"pk": campaign.pk})).content.decode())


def assert_refused(source, reader, campaign, words: str):
    source.refresh_from_db()
    assert source.index_state == "failed" and words in source.error and "Nothing from this file was stored" in source.error
    assert not KnowledgeChunk.objects.filter(source=source).exists() and not source.entries.exists()
    assert words in library_page(reader, campaign)


def test_a_file_of_tiny_sections_is_joined_into_few_passages_within_the_ratio(
    reader, campaign, settings, django_capture_on_commit_callbacks
):
    data = sections(8000)
    source = upload(reader, campaign, django_capture_on_commit_callbacks, "tiny.md", data)
    assert source.index_state == "ready"
    assert source.passage_count < 1000  # 8,000 before
    assert source.upload_bytes == len(data)
    assert source.stored_bytes / source.upload_bytes <= settings.LOREMASTER_MAX_STORED_RATIO
    joined = KnowledgeChunk.objects.filter(source=source).order_by("index").first()
    assert "note 0\nword0" in joined.text and "note 1\nword1" in joined.text


def test_a_world_info_file_of_bare_entries_is_refused_for_its_ratio(
    reader, campaign, settings, django_capture_on_commit_callbacks
):
    """Bare entries take 9-10 times their upload, under the default of 12: an
    instance that sets 6 refuses them."""
    settings.LOREMASTER_MAX_STORED_RATIO = 6
    book = {"entries": {str(i): {"uid": i, "key": [f"k{i}"], "content": f"c{i}"} for i in range(3000)}}
    source = upload(reader, campaign, django_capture_on_commit_callbacks, "bare.json",
                    json.dumps(book, separators=(",", ":")).encode(), classification="")
    assert_refused(source, reader, campaign, "over this instance's limit of 6 times")
    assert not LoreEntry.objects.exists()


def test_a_source_over_the_passage_cap_is_refused(reader, campaign, settings, django_capture_on_commit_callbacks):
    settings.LOREMASTER_MAX_PASSAGES_PER_SOURCE = 3
    source = upload(reader, campaign, django_capture_on_commit_callbacks, "five.md", sections(5))
    assert_refused(source, reader, campaign, "This file makes 5 passages; a source may hold at most 3")


def test_a_library_over_the_passage_cap_refuses_the_file_that_would_pass_it(
    reader, campaign, settings, django_capture_on_commit_callbacks
):
    settings.LOREMASTER_MAX_PASSAGES_PER_CAMPAIGN = 6
    first = upload(reader, campaign, django_capture_on_commit_callbacks, "a.md", sections(4, "a"))
    second = upload(reader, campaign, django_capture_on_commit_callbacks, "b.md", sections(4, "b"))
    first.refresh_from_db()
    assert first.index_state == "ready" and first.passage_count == 4
    assert_refused(second, reader, campaign, "the library would hold 8, over this instance's limit of 6 per campaign")


def test_a_readers_stored_bytes_are_capped_over_all_their_campaigns(
    reader, campaign, alice, settings, django_capture_on_commit_callbacks
):
    settings.LOREMASTER_MAX_STORED_BYTES_PER_READER = 5_000
    first = upload(reader, campaign, django_capture_on_commit_callbacks, "a.md", sections(12, "a"))
    first.refresh_from_db()
    assert first.index_state == "ready" and 2_500 < first.stored_bytes < 5_000
    other = CampaignFactory(owner=alice, endpoint=campaign.endpoint)
    second = upload(reader, other, django_capture_on_commit_callbacks, "b.md", sections(12, "b"))
    assert_refused(second, reader, other, "per reader")


def test_a_reindex_over_a_cap_keeps_the_passages_in_use(reader, campaign, settings, django_capture_on_commit_callbacks):
    source = upload(reader, campaign, django_capture_on_commit_callbacks, "five.md", sections(5))
    settings.LOREMASTER_MAX_PASSAGES_PER_SOURCE = 3
    with django_capture_on_commit_callbacks(execute=True):
        reader.post(reverse("source_reindex", kwargs={"pk": campaign.pk, "source_id": source.pk}), **HX)
    source.refresh_from_db()
    assert source.index_state == "ready" and source.passage_count == 5
    assert "a source may hold at most 3" in source.error and KnowledgeChunk.objects.filter(source=source).count() == 5
