"""The library page: upload, bad input, per-source settings, live state."""

import html
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory
from django.urls import reverse
from django_htmx.middleware import HtmxDetails

from knowledge import views
from knowledge.models import IndexJob, KnowledgeChunk, KnowledgeSource
from tests.factories import CampaignFactory, KnowledgeSourceFactory
from tests.knowledge.lorebooks.test_png_bomb import bomb

HX = {"HTTP_HX_REQUEST": "true"}
LORE = "# Westhaven\n\n## The Harbour\n\nTides run high."


def post_files(client, campaign, *files, captured=None, **fields):
    data = {"files": list(files), "classification": "reference", "visibility": "visible", **fields}
    url = reverse("library_upload", kwargs={"pk": campaign.pk})
    if captured is None:
        return client.post(url, data, **HX)
    with captured(execute=True):
        return client.post(url, data, **HX)


def md(name, text):
    return SimpleUploadedFile(name, text.encode() if isinstance(text, str) else text, content_type="text/markdown")


def test_the_library_page_lists_the_campaigns_sources(reader, campaign):
    KnowledgeSourceFactory(campaign=campaign, title="Westhaven")
    page = reader.get(reverse("library", kwargs={"pk": campaign.pk}))
    assert page.status_code == 200 and "Westhaven" in page.content.decode()


def test_several_files_upload_at_once_and_become_ready(reader, campaign, django_capture_on_commit_callbacks):
    response = post_files(
        reader, campaign, md("westhaven.md", LORE), md("notes.txt", "Plain notes about the salt road."),
        md("old.markdown", "# Old\n\nOld roads."), captured=django_capture_on_commit_callbacks, classification="canon",
    )
    body = response.content.decode()
    assert response.status_code == 200 and "Imported 3 files" in body
    assert set(KnowledgeSource.objects.values_list("title", "classification", "index_state")) == {
        ("Westhaven", "canon", "ready"), ("notes", "canon", "ready"), ("Old", "canon", "ready"),
    }


def test_without_htmx_an_upload_redirects_back_with_a_message(reader, campaign):
    url = reverse("library_upload", kwargs={"pk": campaign.pk})
    response = reader.post(url, {"files": [md("a.md", LORE)], "classification": "reference", "visibility": "visible"},
                           follow=True)
    assert response.redirect_chain[-1][0] == reverse("library", kwargs={"pk": campaign.pk})
    assert "Imported 1 file" in response.content.decode()


@pytest.mark.parametrize(
    ("upload", "message"),
    [
        (md("notes.docx", "a word file"), "Loremaster imports Markdown (.md, .markdown) and plain text (.txt)"),
        (md("empty.md", ""), "the file is empty"),
        (md("blank.md", "  \n\n \t\n"), "the file is empty"),
    ],
)
def test_a_file_the_request_can_tell_is_bad_is_refused_at_once_and_nothing_is_stored(reader, campaign, upload, message):
    response = post_files(reader, campaign, upload)
    assert message in response.content.decode()
    assert not KnowledgeSource.objects.exists() and not IndexJob.objects.exists()


@pytest.mark.parametrize(
    ("upload", "message"),
    [
        (md("map.png", "not really a png"), "map.png: the file is not a PNG image"),
        (md("latin1.md", "Caf\xe9".encode("latin-1")), "not UTF-8 text"),
        (md("binary.txt", b"abc\x00def"), "binary data"),
    ],
)
def test_a_file_that_cannot_be_read_fails_its_job_with_a_clear_message_and_stores_nothing_else(
    reader, campaign, upload, message, django_capture_on_commit_callbacks
):
    post_files(reader, campaign, upload, captured=django_capture_on_commit_callbacks)
    source = KnowledgeSource.objects.get()
    assert source.index_state == "failed" and message in source.error
    assert not KnowledgeChunk.objects.exists() and not source.entries.exists()
    assert message in reader.get(reverse("library", kwargs={"pk": campaign.pk})).content.decode()


def test_a_png_bomb_is_refused_quickly_naming_the_limit_and_nothing_is_stored(
    reader, campaign, django_capture_on_commit_callbacks
):
    started = time.monotonic()
    post_files(reader, campaign, md("bomb.png", bomb()), captured=django_capture_on_commit_callbacks)
    assert time.monotonic() - started < 3
    source = KnowledgeSource.objects.get()
    message = "bomb.png: Character Card PNG, field “chara”: this PNG's text chunks inflate past 8 MB"
    assert source.index_state == "failed" and message in source.error
    assert not KnowledgeChunk.objects.exists() and not source.entries.exists()
    assert message in html.unescape(reader.get(reverse("library", kwargs={"pk": campaign.pk})).content.decode())


def test_a_file_over_the_size_limit_is_refused_while_it_streams(reader, campaign, settings):
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 1024
    response = post_files(reader, campaign, md("huge.md", "x " * 5000), md("fine.md", LORE))
    body = response.content.decode()
    assert "huge.md: the file is over the 1.0 KB limit." in body
    assert list(KnowledgeSource.objects.values_list("original_filename", flat=True)) == ["fine.md"]


def test_an_oversized_request_is_refused_before_its_body_is_read(alice, campaign, settings):
    settings.KNOWLEDGE_MAX_REQUEST_BYTES = 10_000
    request = RequestFactory().post(
        reverse("library_upload", kwargs={"pk": campaign.pk}), {"files": [md("a.md", LORE)]}, **HX
    )
    request.META["CONTENT_LENGTH"] = "50000000"

    class Unreadable:
        def read(self, *args):
            raise AssertionError("the body was read")

        readline = read

    request._stream = Unreadable()
    request.user = alice
    request.htmx = HtmxDetails(request)
    response = views.library_upload(request, pk=campaign.pk)
    assert "This upload is 47.7 MB, over the 9.8 KB a single upload may carry" in response.content.decode()
    assert not KnowledgeSource.objects.exists()


def test_too_many_files_at_once_are_refused(reader, campaign, settings):
    settings.KNOWLEDGE_MAX_FILES_PER_UPLOAD = 2
    response = post_files(reader, campaign, *[md(f"{n}.md", f"Lore {n}.") for n in range(3)])
    assert "Upload at most 2 files at a time." in response.content.decode()
    assert not KnowledgeSource.objects.exists()


def test_uploading_nothing_asks_for_a_file(reader, campaign):
    response = post_files(reader, campaign)
    assert response.status_code == 400 and "Choose one or more files" in response.content.decode()


def test_a_duplicate_upload_is_reported_not_stored(reader, campaign, django_capture_on_commit_callbacks):
    post_files(reader, campaign, md("westhaven.md", LORE), captured=django_capture_on_commit_callbacks)
    response = post_files(reader, campaign, md("again.md", LORE))
    assert "again.md: the same text is already in this library as “Westhaven”." in response.content.decode()
    assert KnowledgeSource.objects.count() == 1


def test_always_include_outside_canon_is_refused_on_upload(reader, campaign):
    response = post_files(reader, campaign, md("a.md", LORE), always_include="on", classification="inspiration")
    assert "Only Canon sources can be always included." in response.content.decode()
    assert not KnowledgeSource.objects.exists()


def test_imported_text_and_names_are_rendered_escaped(reader, campaign, library):
    source = library(campaign, "# <b>Bold</b>\n\n<script>alert('lore')</script>", filename="<i>x</i>.md")
    library_page = reader.get(reverse("library", kwargs={"pk": campaign.pk})).content.decode()
    detail = reader.get(reverse("source_detail", kwargs={"pk": campaign.pk, "source_id": source.pk})).content.decode()
    for page in (library_page, detail):
        assert "<script>alert" not in page and "<i>x</i>" not in page
    assert "&lt;script&gt;alert(&#x27;lore&#x27;)&lt;/script&gt;" in detail
    assert "&lt;b&gt;Bold&lt;/b&gt;" in detail


def test_source_settings_change_without_a_reindex(reader, campaign, library):
    source = library(campaign, LORE)
    chunks = list(KnowledgeChunk.objects.values_list("pk", flat=True))
    url = reverse("source_edit", kwargs={"pk": campaign.pk, "source_id": source.pk})
    response = reader.post(url, {"title": "Westhaven lore", "classification": "canon", "visibility": "hidden",
                                 "always_include": "on"}, **HX)
    assert response.status_code == 200
    source.refresh_from_db()
    assert (source.title, source.classification, source.visibility, source.always_include, source.enabled) == (
        "Westhaven lore", "canon", "hidden", True, False)
    assert list(KnowledgeChunk.objects.values_list("pk", flat=True)) == chunks
    assert source.jobs.count() == 1


def test_a_source_is_marked_known_to_one_seat_from_its_row(reader, campaign, library):
    source = library(campaign, LORE)
    url = reverse("source_edit", kwargs={"pk": campaign.pk, "source_id": source.pk})
    response = reader.post(url, {"title": "Westhaven", "classification": "reference", "visibility": "visible",
                                 "enabled": "on", "secret_seat": " Mara "}, **HX)
    assert response.status_code == 200 and 'name="secret_seat" value="Mara"' in response.content.decode()
    source.refresh_from_db()
    assert source.secret_seat == "Mara"


def test_always_include_is_refused_for_a_non_canon_source(reader, campaign, library):
    source = library(campaign, LORE)
    url = reverse("source_edit", kwargs={"pk": campaign.pk, "source_id": source.pk})
    response = reader.post(url, {"title": "x", "classification": "reference", "visibility": "visible",
                                 "always_include": "on", "enabled": "on"}, **HX)
    body = response.content.decode()
    assert response.status_code == 400 and "Only Canon sources can be always included." in body
    # The row comes back with the reader's choices in its fields, the reason under them.
    assert 'name="title" value="x"' in body and '<option value="reference" selected>' in body
    assert 'name="always_include" checked' in body and 'class="error refusal" role="alert"' in body
    source.refresh_from_db()
    assert not source.always_include and source.title == "Westhaven"


def test_delete_asks_for_confirmation_then_removes_the_source_and_its_passages(reader, campaign, library):
    source = library(campaign, LORE)
    url = reverse("source_delete", kwargs={"pk": campaign.pk, "source_id": source.pk})
    confirm = reader.get(url)
    assert "cannot be undone" in confirm.content.decode() and KnowledgeSource.objects.exists()
    reader.post(url)
    assert not KnowledgeSource.objects.exists() and not KnowledgeChunk.objects.exists()


def test_reindex_queues_a_job_and_the_page_starts_polling(reader, campaign, library):
    source = library(campaign, LORE)
    response = reader.post(reverse("source_reindex", kwargs={"pk": campaign.pk, "source_id": source.pk}), **HX)
    body = response.content.decode()
    assert source.jobs.filter(state=IndexJob.State.QUEUED).count() == 1
    assert 'id="library-poll" hx-swap-oob="true"' in body and 'hx-trigger="every 2s"' in body
    assert "re-indexing 0%" in body


def test_polling_continues_while_a_source_is_in_flight_and_stops_after(reader, campaign, library):
    source = library(campaign, LORE)
    pending = KnowledgeSourceFactory(campaign=campaign, index_state="pending")
    url = reverse("library", kwargs={"pk": campaign.pk}) + "?poll=1"
    busy = reader.get(url, **HX).content.decode()
    assert 'hx-trigger="every 2s"' in busy
    assert f'id="source-{pending.pk}-state" hx-swap-oob="true"' in busy and "Waiting for a worker" in busy
    pending.delete()
    idle = reader.get(url, **HX).content.decode()
    assert "hx-trigger" not in idle
    assert f'id="source-{source.pk}-state" hx-swap-oob="true"' in idle and "Ready" in idle


def test_the_state_shows_indexing_progress_and_a_failure_reason(reader, campaign):
    indexing = KnowledgeSourceFactory(campaign=campaign, index_state="indexing")
    from tests.factories import IndexJobFactory

    IndexJobFactory(source=indexing, state="running", progress=40, step="Embedding 40 of 100 passages")
    KnowledgeSourceFactory(campaign=campaign, index_state="failed", error="The file could not be indexed: <oops>.")
    page = reader.get(reverse("library", kwargs={"pk": campaign.pk})).content.decode()
    assert "Indexing 40%" in page and "Embedding 40 of 100 passages" in page
    assert "The file could not be indexed: &lt;oops&gt;." in page


def test_another_readers_source_is_not_reachable_through_my_campaign(reader, campaign, bob):
    bobs = KnowledgeSourceFactory(campaign=CampaignFactory(owner=bob))
    for name in ("source_detail", "source_delete"):
        assert reader.get(reverse(name, kwargs={"pk": campaign.pk, "source_id": bobs.pk})).status_code == 404
    response = reader.post(reverse("source_edit", kwargs={"pk": campaign.pk, "source_id": bobs.pk}),
                           {"title": "mine now", "classification": "canon", "visibility": "visible"})
    assert response.status_code == 404
    bobs.refresh_from_db()
    assert bobs.title != "mine now"


def test_an_outsider_cannot_upload_into_anothers_library(client, bob, campaign):
    client.force_login(bob)
    response = post_files(client, campaign, md("a.md", LORE))
    assert response.status_code == 404 and not KnowledgeSource.objects.exists()


def test_more_files_than_django_parses_get_the_same_friendly_refusal(alice, campaign, settings):
    from django.test import Client

    settings.KNOWLEDGE_MAX_FILES_PER_UPLOAD = 2
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 3
    # With the CSRF check enforced, as in a browser: it parses the body first.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    browser.get(reverse("library", kwargs={"pk": campaign.pk}))
    response = post_files(browser, campaign, *[md(f"{n}.md", f"Lore {n}.") for n in range(5)],
                          csrfmiddlewaretoken=browser.cookies["csrftoken"].value)
    # A 400 that carries the library with the reason, not Django's bare one.
    assert response.status_code == 400
    assert "Upload at most 2 files at a time." in response.content.decode()
    assert not KnowledgeSource.objects.exists()
