"""Playing together in Chromium (issue 27): the game master (alice) and two
players (bob as Mira, carol as Tomas) in three browser contexts on one
campaign of the scripted model. In every turn order each page sees the
others' actions, attributed to their seats, and the narration as it
streams, without a reload; in rounds one narration answers the round, in
turns the page says whose turn it is and refuses the wrong seat; under
review the players read "reviewing" until the game master approves.

Each turn order runs at both widths (1280 and 390 px, the `width` fixture):
the turn box, the turn-order card and the refusal are what a phone changes,
and they differ per mode, so a combined phone test would test less for
little gain: a mode's test takes 4-8 s, and the file about 70 s on
PostgreSQL, of which the servers' start is 8. Review mode and the watcher
add no layout of their own (one button, no turn box), so each runs once.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from storyapp.models import Campaign, Membership
from tests.browser.conftest import _new_page, signed_in
from tests.browser.helpers import horizontal_overflow
from tests.factories import MembershipFactory, UserFactory

LIVE = 10_000
NARRATED = 20_000


def narration(opening: str, words: int = 30) -> dict:
    """A reply that streams for a second or two, so it is seen being written."""
    return {"reply": opening + " " + " ".join(f"{opening.split()[0].lower()}{n}" for n in range(words)),
            "delay": 0.04}


@pytest.fixture
def players(browser, base, width, campaign):
    """bob (Mira) and carol (Tomas), seated in alice's campaign, each in a
    browser of their own at the test's width; console errors fail the test."""
    pages, contexts, errors = {}, [], []
    for username, seat in (("bob", "Mira"), ("carol", "Tomas")):
        user = UserFactory(username=username)
        MembershipFactory(campaign=campaign, user=user, seat_name=seat)
        context, player = _new_page(browser, base, width, errors=errors)
        signed_in(context, base, user)
        player.console_errors = errors
        contexts.append(context)
        pages[seat] = player
    yield pages
    for context in contexts:
        context.close()
    assert not errors, f"console errors on a player's page: {errors}"


def refused(page) -> None:
    """A refusal is a 409, which Chromium logs as an error: the one this test expects."""
    page.console_errors[:] = [e for e in page.console_errors if "status of 409" not in e]


def open_all(campaign, *pages):
    for each in pages:
        each.goto(f"/campaigns/{campaign.pk}/")
        expect(each.locator("#live-state")).to_have_text("Live", timeout=LIVE)


def send(page, text: str) -> None:
    page.locator("#turn-text").fill(text)
    page.locator("#send-button").click()


def action_by(page, seat: str, text: str):
    return page.locator("#story .action.player", has=page.locator(".who", has_text=seat)).filter(has_text=text)


def fits(page) -> None:
    """The page is no wider than a phone, and the turn box can be reached."""
    assert horizontal_overflow(page) <= 0, f"the page is {horizontal_overflow(page)} px wider than its viewport"
    if page.locator("#send-button").count():
        page.locator("#send-button").scroll_into_view_if_needed()
        expect(page.locator("#send-button")).to_be_in_viewport()


def set_mode(campaign, mode: str, *, review: bool = False) -> None:
    Campaign.objects.filter(pk=campaign.pk).update(turn_mode=mode, review=review)


def test_in_free_play_everyone_sees_each_action_and_its_narration_live(page, players, campaign, model, width):
    set_mode(campaign, Campaign.TurnMode.FREE)
    mira, tomas = players["Mira"], players["Tomas"]
    model.script(narration("Moonlight pools on the quay"), narration("Gulls scatter from the mast"))
    open_all(campaign, page, mira, tomas)

    send(mira, "I untie the boat.")
    # The narration streams on everyone's page: seen before it has finished.
    for each in (page, mira, tomas):
        expect(action_by(each, "Mira", "I untie the boat.")).to_have_count(1, timeout=LIVE)
    expect(tomas.locator("#story .action.ai .prose").first).to_contain_text("Moonlight pools", timeout=LIVE)
    send(tomas, "I climb the mast.")

    for each in (page, mira, tomas):
        expect(action_by(each, "Tomas", "I climb the mast.")).to_have_count(1, timeout=NARRATED)
        expect(each.locator("#story .action.ai.status-done")).to_have_count(2, timeout=NARRATED)
        prose = each.locator("#story .action.ai .prose")
        expect(prose.nth(0)).to_contain_text("moonlight29")
        expect(prose.nth(1)).to_contain_text("Gulls scatter")
    # One narration each, in the order the actions came.
    order = page.locator("#story .action").evaluate_all("els => els.map(e => e.className.split(' ')[1])")
    assert order == ["player", "ai", "player", "ai"], order
    for each in (page, mira, tomas):
        fits(each)


def test_in_rounds_one_narration_answers_the_round_once_both_players_acted(page, players, campaign, model, width):
    set_mode(campaign, Campaign.TurnMode.ROUNDS)
    mira, tomas = players["Mira"], players["Tomas"]
    model.script(narration("The tide turns under both of them"))
    open_all(campaign, page, mira, tomas)
    expect(page.locator("#turn-order")).to_contain_text("Mira: not yet")

    send(mira, "I read the chart.")
    for each in (page, tomas):
        expect(action_by(each, "Mira", "I read the chart.")).to_have_count(1, timeout=LIVE)
        expect(each.locator("#turn-order")).to_contain_text("Mira: acted", timeout=LIVE)
    assert page.locator("#story .action.ai").count() == 0, "a narration came before the round was complete"
    # Mira has had her say in this round: no Pass for her, and the box asks for an action, not an empty send.
    expect(mira.locator("#pass-button")).to_have_count(0, timeout=LIVE)
    expect(tomas.locator("#pass-button")).to_be_visible()
    expect(mira.locator("#turn-text")).to_have_attribute("placeholder", "What does your character do?")
    send(mira, "I read it again.")
    expect(mira.locator("#story .refusal")).to_contain_text("already acted in this round")
    refused(mira)

    send(tomas, "I trim the sail.")
    for each in (page, mira, tomas):
        expect(action_by(each, "Tomas", "I trim the sail.")).to_have_count(1, timeout=LIVE)
        expect(each.locator("#story .action.ai .prose")).to_contain_text("The tide turns", timeout=LIVE)
        expect(each.locator("#story .action.ai.status-done")).to_have_count(1, timeout=NARRATED)
        expect(each.locator("#story .action.ai .prose")).to_contain_text("the29")
    order = page.locator("#story .action").evaluate_all("els => els.map(e => e.className.split(' ')[1])")
    assert order == ["player", "player", "ai"], order
    for each in (page, mira, tomas):
        expect(each.locator("#turn-order")).to_contain_text("Tomas: not yet")
        fits(each)


def test_in_turns_the_page_says_whose_turn_it_is_and_refuses_the_other_seat(page, players, campaign, model, width):
    set_mode(campaign, Campaign.TurnMode.TURNS)
    mira, tomas = players["Mira"], players["Tomas"]
    model.script(narration("The lighthouse door creaks"), narration("A bell tolls below"))
    open_all(campaign, page, mira, tomas)
    expect(mira.locator(".whose-turn")).to_have_text("It is your turn (Mira).")
    expect(tomas.locator(".whose-turn")).to_have_text("It is Mira's turn.")
    expect(page.locator(".whose-turn")).to_have_text("It is Mira's turn.")

    send(tomas, "I push ahead of her.")
    expect(tomas.locator("#story .refusal")).to_have_text("It is Mira's turn. Wait for yours, then send your action.")
    expect(tomas.locator("#turn-text")).to_have_value("I push ahead of her.")
    refused(tomas)
    if width == "phone":
        tomas.locator("#story .refusal").scroll_into_view_if_needed()
        expect(tomas.locator("#story .refusal")).to_be_in_viewport()

    send(mira, "I open the lighthouse door.")
    for each in (page, tomas):
        expect(action_by(each, "Mira", "I open the lighthouse door.")).to_have_count(1, timeout=LIVE)
        expect(each.locator("#story .action.ai .prose")).to_contain_text("lighthouse door creaks", timeout=LIVE)
    for each in (page, mira):
        expect(each.locator(".whose-turn")).to_have_text("It is Tomas's turn.", timeout=NARRATED)
    expect(tomas.locator(".whose-turn")).to_have_text("It is your turn (Tomas).", timeout=NARRATED)

    send(tomas, "I climb the stair.")
    for name, each in (("the game master's", page), ("Mira's", mira), ("Tomas's", tomas)):
        expect(action_by(each, "Tomas", "I climb the stair."), f"on {name} page").to_have_count(1, timeout=NARRATED)
        expect(each.locator("#story .action.ai.status-done")).to_have_count(2, timeout=NARRATED)
        expect(each.locator("#story .action.ai .prose").nth(1)).to_contain_text("A bell tolls")
    assert action_by(page, "Tomas", "I push ahead of her.").count() == 0, "the refused action was kept"
    for each in (page, mira, tomas):
        fits(each)


@pytest.mark.parametrize("width", ["desktop"])
def test_under_review_the_players_read_the_narration_only_once_the_game_master_approves(
        page, players, campaign, model, width):
    set_mode(campaign, Campaign.TurnMode.FREE, review=True)
    mira, tomas = players["Mira"], players["Tomas"]
    model.script(narration("Secret stones slide apart"))
    open_all(campaign, page, mira, tomas)

    send(mira, "I press the carved stone.")
    approve = page.locator(".review-tools button", has_text="Approve")
    expect(approve).to_be_visible(timeout=NARRATED)
    expect(page.locator("#story .action.ai .prose")).to_contain_text("secret29")
    for each in (mira, tomas):
        expect(action_by(each, "Mira", "I press the carved stone.")).to_have_count(1, timeout=LIVE)
        expect(each.locator("#story .action.ai .held-for-review")).to_contain_text("reviewing", timeout=LIVE)
        assert "secret stones" not in each.locator("#story").inner_text().lower(), "a player read the held narration"
        expect(each.locator(".review-tools")).to_have_count(0)
        # Nor may a player let the narrator go on from a narration they have not read.
        expect(each.locator("#continue-button")).to_have_count(0)

    approve.click()
    expect(page.locator(".review-tools")).to_have_count(0)
    for each in (mira, tomas):
        expect(each.locator("#story .action.ai .prose")).to_contain_text("Secret stones slide apart", timeout=LIVE)
        expect(each.locator("#story .action.ai .prose")).to_contain_text("secret29")
        expect(each.locator("#story .held-for-review")).to_have_count(0)
        expect(each.locator("#continue-button")).to_be_visible()


@pytest.mark.parametrize("width", ["desktop"])
def test_a_watcher_follows_the_story_live_and_has_no_turn_box(page, browser, base, campaign, model, width):
    watcher = UserFactory(username="dave")
    MembershipFactory(campaign=campaign, user=watcher, role=Membership.Role.WATCHER)
    model.script(narration("Fog rolls over the harbour"))
    errors: list[str] = []
    context, watching = _new_page(browser, base, "phone", errors=errors)
    signed_in(context, base, watcher)
    open_all(campaign, page, watching)
    expect(watching.locator("#watching")).to_be_visible()
    expect(watching.locator("#turn-text")).to_have_count(0)

    send(page, "The harbour bell rings.")
    expect(watching.locator("#story .action.player")).to_contain_text("The harbour bell rings.", timeout=LIVE)
    expect(watching.locator("#story .action.ai.status-done")).to_have_count(1, timeout=NARRATED)
    expect(watching.locator("#story .action.ai .prose")).to_contain_text("fog29")
    assert horizontal_overflow(watching) <= 0
    context.close()
    assert not errors, f"console errors on the watcher's page: {errors}"
