"""Lorebooks through the library in Chromium: a World Info file and a card
PNG upload with a report of what arrived, the source's page lists the
entries at phone width, an entry is edited and re-indexed in place, the
book exports, and a broken lorebook is refused with nothing stored."""

import json
from pathlib import Path

from playwright.sync_api import expect

from knowledge.models import KnowledgeChunk, KnowledgeSource, LoreEntry
from tests.browser.helpers import horizontal_overflow
from tests.knowledge.lorebooks.test_cards import V2, png, text_chunk

DATA = Path(__file__).parents[1] / "knowledge" / "lorebooks" / "data"


def test_lorebooks_upload_report_and_their_entries_are_edited_in_place(page, campaign, tmp_path):
    card = tmp_path / "vell.png"
    card.write_bytes(png(text_chunk("chara", V2)))
    page.goto(f"/campaigns/{campaign.pk}/library/")
    page.locator("#upload-files").set_input_files([str(DATA / "st_westhaven.json"), str(card)])
    expect(page.locator("#chosen-files")).to_contain_text("vell.png")
    page.locator("#upload-button").click()
    expect(page.locator(".upload-outcome")).to_contain_text("Imported 2 files")
    # Each file is read by the worker; its report comes on its row, with the ready state.
    expect(page.locator(".source-state .badge.ok")).to_have_count(2, timeout=30_000)
    reports = page.locator(".source-state .import-report")
    expect(reports.filter(has_text="SillyTavern World Info, 6 entries, 1 disabled")).to_have_count(1)
    expect(reports.filter(has_text="Character Card")).to_have_count(1)
    assert set(KnowledgeSource.objects.values_list("classification", flat=True)) == {"canon"}

    westhaven = KnowledgeSource.objects.get(format="SillyTavern World Info")
    page.goto(f"/campaigns/{campaign.pk}/library/{westhaven.pk}/")
    entries = page.locator(".entries > li")
    expect(entries).to_have_count(6)
    expect(page.locator(".entry", has_text="The salt wind").locator(".badge")).to_have_text("Always included")
    expect(page.locator(".entry", has_text="Old Lighthouse").locator(".badge")).to_have_text("Disabled")
    assert horizontal_overflow(page) <= 0

    guild = page.locator(".entry", has_text="The Lantern Guild")
    guild.locator("summary", has_text="Edit").click()
    guild.locator("input[name=title]").fill("The Wick Guild")
    guild.locator("input[name=keys]").fill("wickmakers, /oil ?merchants?/i")
    guild.locator("textarea[name=text]").fill("The Wick Guild sells oil by the drop.")
    guild.get_by_role("button", name="Save entry").click()
    saved = page.locator(".entry", has_text="The Wick Guild")
    expect(saved.locator(".ok-note")).to_contain_text("Saved")
    expect(saved.locator("code.key")).to_have_text(["wickmakers", "/oil ?merchants?/i"])
    expect(page.locator(".entries > li")).to_have_count(6)
    entry = westhaven.entries.get(title="The Wick Guild")
    page.goto(f"/campaigns/{campaign.pk}/library/")
    expect(page.locator(".source-state .badge.ok")).to_have_count(2, timeout=30_000)
    expect(page.locator(".source-state .spinner")).to_have_count(0, timeout=30_000)
    assert KnowledgeChunk.objects.get(entry=entry).text == "The Wick Guild sells oil by the drop."

    page.goto(f"/campaigns/{campaign.pk}/library/{westhaven.pk}/")
    with page.expect_download() as download:
        page.get_by_role("link", name="Export as SillyTavern World Info").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert "The Wick Guild" in {e["comment"] for e in exported["entries"].values()}


def test_a_broken_lorebook_is_refused_in_the_page_and_nothing_is_stored(page, campaign, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"entries": {"7": {"key": ["dragon"], "content": ["not", "text"]}}}')
    page.goto(f"/campaigns/{campaign.pk}/library/")
    page.locator("#upload-files").set_input_files(str(broken))
    page.locator("#upload-button").click()
    # The worker reads the book and refuses it: the row says why, none of it is stored.
    refusal = page.locator(".source-state .error")
    expect(refusal).to_contain_text("broken.json", timeout=30_000)
    expect(refusal).to_contain_text("entry 7")
    expect(refusal).to_contain_text("content")
    assert KnowledgeSource.objects.get().index_state == "failed"
    assert not LoreEntry.objects.exists() and not KnowledgeChunk.objects.exists()
