"""Playing together in Chromium: a player's page follows the game master's
turn, its narration and a whisper to their seat without a reload, keeps what
the player is typing, and shows who is here."""

from playwright.sync_api import expect

from storyapp.models import Membership
from tests.factories import UserFactory


def test_a_players_page_shows_the_game_masters_turn_and_its_narration_live(page, other_page, campaign, model):
    Membership.objects.create(campaign=campaign, user=UserFactory(username="bob"),
                              role=Membership.Role.PLAYER, seat_name="Mira")
    model.script({"reply": "The lantern gutters, then flares " + " ".join(f"bright{n}" for n in range(30)),
                  "delay": 0.05})
    other_page.goto(f"/campaigns/{campaign.pk}/")
    expect(other_page.locator("#live-state")).to_have_text("Live")
    other_page.locator("#turn-text").fill("I wait by the door, half a thought")
    page.goto(f"/campaigns/{campaign.pk}/")
    expect(page.locator("#live-present")).to_contain_text("bob (Mira)", timeout=10_000)
    expect(other_page.locator("#live-present")).to_contain_text("alice", timeout=10_000)

    page.locator("#turn-text").fill("I lift the lantern.")
    page.locator("#send-button").click()

    expect(other_page.locator("#story .action.player")).to_contain_text("I lift the lantern.", timeout=10_000)
    # The narration arrives through its own stream, then settles, on bob's page as on alice's.
    expect(other_page.locator("#story .action.ai .prose")).to_contain_text("The lantern gutters", timeout=15_000)
    expect(other_page.locator("#story .action.ai.status-done")).to_have_count(1, timeout=20_000)
    expect(other_page.locator("#story .action.ai .prose")).to_contain_text("bright29")
    expect(other_page.locator("#turn-text")).to_have_value("I wait by the door, half a thought")
    assert other_page.locator("#story .action.ai .prose").inner_text().count("The lantern gutters") == 1


def test_a_whisper_reaches_its_players_page_without_a_reload(page, other_page, campaign):
    Membership.objects.create(campaign=campaign, user=UserFactory(username="bob"),
                              role=Membership.Role.PLAYER, seat_name="Mira")
    other_page.goto(f"/campaigns/{campaign.pk}/")
    expect(other_page.locator("#live-state")).to_have_text("Live")
    expect(other_page.locator("#whispers")).to_be_hidden()
    other_page.locator("#turn-text").fill("I count the coins")

    page.goto(f"/campaigns/{campaign.pk}/")
    page.locator("#whispers textarea").fill("The third coin is false.")
    page.locator("#whisper-send").click()
    expect(page.locator("#whispers .whisper-list")).to_contain_text("To Mira: The third coin is false.")

    expect(other_page.locator("#whispers .whisper-list")).to_contain_text("The third coin is false.", timeout=10_000)
    expect(other_page.locator("#whispers")).to_be_visible()
    expect(other_page.locator("#whisper-send")).to_have_count(0)
    expect(other_page.locator("#turn-text")).to_have_value("I count the coins")
