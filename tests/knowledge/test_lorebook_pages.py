"""Lorebooks through the library's pages and the import command: the upload
reports what arrived, the source's page shows the entries and what the file
kept, an entry is edited and re-indexed, and the book exports as World Info."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from knowledge.models import KnowledgeChunk, KnowledgeSource, LoreEntry
from tests.factories import CampaignFactory
from tests.knowledge.test_entry_editor import posted

HX = {"HTTP_HX_REQUEST": "true"}
DATA = Path(__file__).parent / "lorebooks" / "data"


def upload(client, campaign, *names, captured, **fields):
    files = [SimpleUploadedFile(n, (DATA / n).read_bytes()) for n in names]
    data = {"files": files, "classification": "", "visibility": "visible", **fields}
    with captured(execute=True):
        return client.post(reverse("library_upload", kwargs={"pk": campaign.pk}), data, **HX)


@pytest.fixture
def westhaven(reader, campaign, django_capture_on_commit_callbacks):
    upload(reader, campaign, "st_westhaven.json", captured=django_capture_on_commit_callbacks)
    return KnowledgeSource.objects.get(campaign=campaign)


def test_an_upload_of_lorebooks_reports_each_format_entries_and_kept_fields(
    reader, campaign, django_capture_on_commit_callbacks
):
    response = upload(
        reader, campaign, "st_westhaven.json", "nai_v5_saltroad.lorebook", "kobold_story_save.json",
        captured=django_capture_on_commit_callbacks,
    )
    assert response.status_code == 200 and "Imported 3 files" in response.content.decode()
    # The workers read the files and report; the library shows it when they are done.
    body = reader.get(reverse("library", kwargs={"pk": campaign.pk})).content.decode()
    assert "SillyTavern World Info, 6 entries, 1 disabled, 1 always included" in body
    assert "NovelAI lorebook v5" in body and "KoboldAI world info" in body
    assert "Kept but not used" in body and "scan_depth" in body and "probability" not in body.split("Kept but not used")[1][:400]
    sources = KnowledgeSource.objects.filter(campaign=campaign)
    assert {s.classification for s in sources} == {"canon"}
    assert {s.index_state for s in sources} == {"ready"}


def test_the_source_page_shows_entries_keys_flags_and_kept_settings(reader, campaign, westhaven):
    page = reader.get(reverse("source_detail", kwargs={"pk": campaign.pk, "source_id": westhaven.pk}))
    body = page.content.decode()
    assert "The Lantern Guild" in body and "lamplighters" in body and "/sea ?serpents?/i" in body
    assert "Always included" in body and "Disabled" in body
    assert "Kept from the file" in body and "scan_depth" in body and "addMemo" in body
    assert reverse("source_export", kwargs={"pk": campaign.pk, "source_id": westhaven.pk}) in body


def test_editing_an_entry_on_its_page_saves_it_and_reindexes_the_book(
    reader, campaign, westhaven, django_capture_on_commit_callbacks
):
    entry = westhaven.entries.get(title="The Lantern Guild")
    url = reverse("entry_edit", kwargs={"pk": campaign.pk, "source_id": westhaven.pk, "entry_id": entry.pk})
    with django_capture_on_commit_callbacks(execute=True):
        response = reader.post(url, posted(
            entry, title="The Wick Guild", keys="wickmakers, /oil ?merchants?/i", text="They sell oil.",
        ), **HX)
    assert response.status_code == 200 and "Saved" in response.content.decode()
    entry.refresh_from_db()
    assert (entry.title, entry.keys, entry.regex_keys, entry.text) == (
        "The Wick Guild", ["wickmakers"], ["/oil ?merchants?/i"], "They sell oil."
    )
    chunk = KnowledgeChunk.objects.get(entry=entry)
    assert chunk.heading_path == "The Wick Guild" and chunk.text == "They sell oil."


def test_a_broken_regex_key_is_refused_and_the_entry_is_left_as_it_was(reader, campaign, westhaven):
    entry = westhaven.entries.get(title="The Lantern Guild")
    url = reverse("entry_edit", kwargs={"pk": campaign.pk, "source_id": westhaven.pk, "entry_id": entry.pk})
    response = reader.post(url, posted(entry, title="X", keys="glade, /([a-z/", text="Y"), **HX)
    body = response.content.decode()
    assert response.status_code == 400 and "regular expression" in body
    # The edit stays open with what the reader typed, the reason above it.
    assert 'name="keys" value="glade, /([a-z/"' in body and 'name="title" value="X"' in body
    assert '<details class="entry-edit" open>' in body and 'class="error refusal" role="alert"' in body
    entry.refresh_from_db()
    assert entry.title == "The Lantern Guild"


@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_the_export_is_world_info_json_with_every_entry(reader, campaign, westhaven):
    response = reader.get(reverse("source_export", kwargs={"pk": campaign.pk, "source_id": westhaven.pk}))
    assert response.status_code == 200 and response["Content-Disposition"].startswith("attachment")
    assert response.streaming
    document = json.loads(b"".join(response))  # the test client reads the async stream whole
    assert sorted(e["comment"] for e in document["entries"].values()) == sorted(
        westhaven.entries.values_list("title", flat=True)
    )


def test_another_readers_entries_and_export_are_not_reachable(reader, campaign, westhaven, bob):
    entry = westhaven.entries.first()
    reader.logout()
    reader.force_login(bob)
    mine = CampaignFactory(owner=bob)
    for pk in (campaign.pk, mine.pk):
        kwargs = {"pk": pk, "source_id": westhaven.pk}
        assert reader.get(reverse("source_export", kwargs=kwargs)).status_code == 404
        response = reader.post(reverse("entry_edit", kwargs={**kwargs, "entry_id": entry.pk}),
                               {"title": "Mine", "keys": "", "text": "", "enabled": "on"})
        assert response.status_code == 404
    assert LoreEntry.objects.get(pk=entry.pk).title == entry.title


def test_import_knowledge_takes_lorebooks_and_defaults_them_to_canon(campaign):
    out = StringIO()
    call_command(
        "import_knowledge", str(DATA / "st_westhaven.json"), str(DATA / "nai_v1_tamriel.story"),
        "--campaign", str(campaign.pk), "--wait", stdout=out, stderr=StringIO(),
    )
    text = out.getvalue()
    assert "SillyTavern World Info, 6 entries" in text and "Ready" in text
    assert set(KnowledgeSource.objects.filter(campaign=campaign).values_list("classification", flat=True)) == {"canon"}


def test_import_knowledge_refuses_a_malformed_lorebook_and_stores_nothing(campaign, tmp_path):
    broken = tmp_path / "broken.lorebook"
    broken.write_text('{"lorebookVersion": 5, "entries": [{"text": "x", "keys": "dragon"}]}')
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("import_knowledge", str(broken), "--campaign", str(campaign.pk), "--wait",
                     stdout=StringIO(), stderr=err)
    assert "NovelAI" in err.getvalue() and "keys" in err.getvalue()
    assert not KnowledgeSource.objects.filter(campaign=campaign).exists()
