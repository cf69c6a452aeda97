"""A character card starts a campaign in Chromium: the card PNG is uploaded,
the play page opens on the card's first message, and its book is in the
new campaign's library."""

import re

from playwright.sync_api import expect

from knowledge.models import KnowledgeSource
from storyapp.models import Campaign
from tests.browser.helpers import horizontal_overflow
from tests.knowledge.lorebooks.test_cards import V2, png, text_chunk


def test_a_card_png_starts_a_campaign_that_opens_on_its_first_message(page, tmp_path):
    card = tmp_path / "card.png"
    card.write_bytes(png(text_chunk("chara", V2)))
    page.goto("/campaigns/")
    page.get_by_role("link", name="Upload a card").click()
    assert horizontal_overflow(page) <= 0
    page.locator("input[type=file]").set_input_files(str(card))
    page.get_by_role("button", name="Create and play").click()
    expect(page).to_have_url(re.compile(r"/campaigns/\d+/$"))
    campaign = Campaign.objects.get(title=V2["data"]["name"])
    assert V2["data"]["first_mes"] == "*You wake with a start.*"
    expect(page.locator(".prose").first).to_have_text("*You wake with a start.*")
    book = KnowledgeSource.objects.get(campaign=campaign)
    assert book.classification == "canon" and book.entries.count() == len(V2["data"]["character_book"]["entries"])
    assert horizontal_overflow(page) <= 0


def test_a_file_that_is_no_card_is_refused_on_the_page(page, tmp_path):
    world = tmp_path / "world.json"
    world.write_text('{"entries": {"0": {"key": ["salt"], "content": "Salt."}}}')
    page.goto("/campaigns/new/from-card/")
    page.locator("input[type=file]").set_input_files(str(world))
    page.get_by_role("button", name="Create and play").click()
    expect(page.locator(".error").first).to_contain_text("not a character card")
    assert not Campaign.objects.filter(title__icontains="world").exists()
