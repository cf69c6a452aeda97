"""The lorebook editor in Chromium (issue 25, item 12), at 1280 and 390 px:
an entry is moved to "at depth" with its depth and role, made sticky and
put in a group, saved in place; the book's World Info settings are saved;
an entry is added and one deleted after the browser asks. Screenshots of
the open editor go to BROWSER_ARTIFACTS."""

from pathlib import Path

from playwright.sync_api import expect

from knowledge import services
from knowledge.lorebooks.stored import expand
from knowledge.models import KnowledgeSource, LoreEntry
from tests.browser.conftest import ARTIFACTS
from tests.browser.helpers import axe_violations, horizontal_overflow
from worldinfo.records import BookSettings

DATA = Path(__file__).parents[1] / "knowledge" / "lorebooks" / "data"


def westhaven(campaign) -> KnowledgeSource:
    name = "st_westhaven.json"
    [source] = services.sources_import(campaign=campaign, files=[(name, (DATA / name).read_bytes())],
                                       enqueue=False).created
    return services.source_index_now(source)


def test_an_entry_is_placed_at_depth_made_sticky_and_grouped_in_place(page, campaign, width):
    book = westhaven(campaign)
    page.goto(f"/campaigns/{campaign.pk}/library/{book.pk}/")
    guild = page.locator(".entry", has_text="The Lantern Guild")
    guild.locator("summary", has_text="Edit").click()
    placement = guild.locator("details.section", has_text="Placement")
    placement.locator("summary").click()
    # Depth and role are asked for only while the position is "at depth".
    expect(placement.locator("input[name=depth]")).to_be_hidden()
    guild.locator("select[name=position]").select_option(label="At depth")
    expect(placement.locator("input[name=depth]")).to_be_visible()
    placement.get_by_label("Depth").fill("3")
    placement.get_by_label("Role").select_option(label="Assistant")
    timed = guild.locator("details.section", has_text="Timed effects")
    timed.locator("summary").click()
    timed.get_by_label("Sticky").fill("2")
    groups = guild.locator("details.section", has_text="Probability and groups")
    groups.locator("summary").click()
    groups.get_by_label("Inclusion groups").fill("harbour news")
    for section in ("Secondary keys", "Matching and recursion", "Characters and triggers"):
        guild.locator("details.section > summary", has_text=section).click()
    assert horizontal_overflow(page) <= 0
    assert axe_violations(page) == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    guild.screenshot(path=str(ARTIFACTS / f"entry-editor-{width}.png"))

    guild.get_by_role("button", name="Save entry").click()
    saved = page.locator(".entry", has_text="The Lantern Guild")
    expect(saved.locator(".ok-note")).to_contain_text("Saved")
    expect(saved.locator(".entry-world-info")).to_have_text("At depth 3 as assistant · order 100 · groups harbour news · sticky 2")
    extras = expand(LoreEntry.objects.get(source=book, title="The Lantern Guild").extras)
    assert (extras["position"], extras["depth"], extras["role"], extras["sticky"], extras["group"]) == (
        4, 3, 2, 2, "harbour news"
    )
    assert horizontal_overflow(page) <= 0


def test_a_refused_value_is_said_and_what_was_typed_stays(page, campaign):
    book = westhaven(campaign)
    page.goto(f"/campaigns/{campaign.pk}/library/{book.pk}/")
    guild = page.locator(".entry", has_text="The Lantern Guild")
    guild.locator("summary", has_text="Edit").click()
    groups = guild.locator("details.section", has_text="Probability and groups")
    groups.locator("summary").click()
    # The browser's own range check is what a reader meets first; past it, the server's.
    groups.locator("input[name=probability]").evaluate("input => input.removeAttribute('max')")
    groups.locator("input[name=probability]").fill("150")
    guild.get_by_role("button", name="Save entry").click()
    refused = page.locator(".entry", has_text="The Lantern Guild")
    expect(refused.locator(".refusal")).to_have_text("Probability: from 0 to 100.")
    expect(refused.locator(".refusal")).to_be_focused()
    expect(refused.locator("input[name=probability]")).to_have_value("150")
    assert expand(LoreEntry.objects.get(source=book, title="The Lantern Guild").extras)["probability"] == 100
    # The refusal's 400 is the browser's console line, not a fault of the page.
    page.console_errors[:] = [e for e in page.console_errors if "status of 400" not in e]


def test_the_book_settings_an_added_entry_and_a_deletion(page, campaign, width):
    book = westhaven(campaign)
    page.goto(f"/campaigns/{campaign.pk}/library/{book.pk}/")
    settings = page.locator("#book-settings")
    settings.locator("summary").click()
    settings.get_by_label("Scan depth").fill("6")
    settings.get_by_label("Recursive scanning").check()
    settings.get_by_label("Max recursion steps").fill("3")
    assert horizontal_overflow(page) <= 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    settings.screenshot(path=str(ARTIFACTS / f"book-settings-{width}.png"))
    settings.get_by_role("button", name="Save settings").click()
    expect(page.locator("#book-settings .ok-note")).to_contain_text("Saved")
    stored = BookSettings.from_stored(KnowledgeSource.objects.get(pk=book.pk).metadata["world_info"])
    assert (stored.scan_depth, stored.recursive, stored.max_recursion_steps) == (6, True, 3)

    adding = page.locator("#add-entry")
    adding.locator("summary", has_text="Add an entry").click()
    adding.get_by_label("Title").fill("The Tide Clock")
    adding.get_by_label("Keys").fill("tide clock")
    adding.get_by_label("Text").fill("It strikes at high water.")
    adding.get_by_role("button", name="Add entry").click()
    expect(page.locator("#add-entry .ok-note")).to_contain_text("Added “The Tide Clock”")
    expect(page.locator("#add-entry .entry", has_text="The Tide Clock")).to_have_count(1)
    assert book.entries.filter(title="The Tide Clock").exists()

    serpents = page.locator(".entry", has_text="Sea serpents")
    serpents.locator("summary", has_text="Edit").click()
    page.once("dialog", lambda dialog: dialog.accept())
    serpents.get_by_role("link", name="Delete entry…").click()
    expect(page.locator(".entry-deleted")).to_have_text("Deleted “Sea serpents”. The book is being re-indexed.", timeout=15000)
    assert not book.entries.filter(title="Sea serpents").exists()
    assert horizontal_overflow(page) <= 0
