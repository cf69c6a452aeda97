"""The inspector's World Info section with 100 entries considered, at 1280
and 390 px: the section is there, the activated entries' table fits its
card, the skipped ones are folded by reason, and nothing is wider than the
screen."""

from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from knowledge import services as knowledge_services
from storyapp import services
from tests.browser.conftest import ARTIFACTS
from tests.browser.helpers import axe_violations, horizontal_overflow
from tests.factories import hundred_entries, world_info_book


def test_the_world_info_section_is_readable_with_100_entries_considered(page, campaign, model):
    result = knowledge_services.sources_import(
        campaign=campaign, files=[("harbour.json", world_info_book(*hundred_entries()))], enqueue=False
    )
    knowledge_services.source_index_now(result.created[0])
    model.script({"reply": "The harbour is quiet tonight."})
    _, narration = services.turn_submit(
        campaign=campaign, text="A storm over the harbour; you lift a lantern.", now=timezone.now()
    )
    narration.refresh_from_db()
    assert narration.status == "done", narration.error
    page.goto(reverse("context_inspector", args=[campaign.pk, narration.pk]))
    section = page.locator("section.world-info")
    expect(section).to_be_visible()
    expect(section.locator(".wi-budget")).to_contain_text("100 entries considered, 3 activated")
    table = section.locator("table.wi-activated")
    expect(table.locator("tbody tr")).to_have_count(3)
    fits = table.evaluate("t => t.scrollWidth <= t.closest('.inspector').clientWidth + 1")
    assert fits, "the activated entries' table is wider than its card"
    skipped = section.locator("details.wi-no_key")
    expect(skipped.locator("summary")).to_contain_text("No key found (97)")
    assert not skipped.locator("li").first.is_visible(), "the skipped entries are unfolded"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(ARTIFACTS / f"world-info-{page.viewport_size['width']}.png"))
    skipped.locator("summary").click()
    expect(skipped.locator("li").first).to_be_visible()
    assert horizontal_overflow(page) <= 0
    assert axe_violations(page) == []
