"""Playing a story in Chromium, at 1280 and 390 px: streamed turns, undo and
redo over whole turns, retry and alternatives, edit, Stop, leaving a
narration and coming back, keyboard focus."""

import re
import time

from playwright.sync_api import expect

import quotas
from storyapp.models import Action

from tests.browser.helpers import horizontal_overflow

PARAGRAPHS = "The tide comes in grey and slow.\n\nA bell tolls twice from the drowned chapel."


def open_play(page, campaign):
    page.goto(f"/campaigns/{campaign.pk}/")
    expect(page.locator("#turn-text")).to_be_visible()


def send(page, text: str) -> None:
    page.locator("#turn-text").fill(text)
    page.locator("#send-button").click()


def narrations(page):
    return page.locator("#story .action.ai")


def wait_settled(page, count: int) -> None:
    expect(page.locator("#story .action.ai.status-done")).to_have_count(count, timeout=20_000)


def test_a_narration_streams_inside_its_own_text_with_paragraphs(page, campaign, model):
    model.script({"reply": PARAGRAPHS + " " + " ".join(f"word{n}" for n in range(40)), "delay": 0.08})
    open_play(page, campaign)
    send(page, "I listen at the chapel door.")
    streaming = page.locator("#story .action.ai.status-streaming, #story .action.ai.status-pending").first
    expect(streaming).to_be_visible()
    prose = streaming.locator(".prose")
    expect(prose).to_contain_text("The tide comes in", timeout=10_000)
    expect(streaming.locator(".status-text")).to_have_text("The narrator is writing…")
    # Mid-stream: the text is inside the narration, above the controls, in the narration's font.
    controls_top = page.locator("#story .controls").bounding_box()["y"]
    assert prose.bounding_box()["y"] < controls_top
    stray = page.evaluate("""() => [...document.getElementById('story').childNodes]
        .filter(n => n.nodeType === 3 && n.textContent.trim()).length""")
    assert stray == 0, "narration text landed loose in the story, outside its narration"
    assert "Georgia" in prose.evaluate("el => getComputedStyle(el).fontFamily")
    expect(prose).to_contain_text("A bell tolls", timeout=10_000)
    assert "\n\n" in prose.inner_text(), "the paragraphs ran together while streaming"
    wait_settled(page, 1)
    done = narrations(page).first.locator(".prose")
    assert done.inner_text().startswith("The tide comes in grey and slow.\n\nA bell tolls twice")
    expect(page.locator("#announcer")).to_contain_text("The tide comes in")


def test_three_turns_each_stored_and_shown_once(page, campaign, model):
    open_play(page, campaign)
    for number in range(1, 4):
        model.script({"reply": f"Narration number {number}.", "delay": 0.02})
        send(page, f"Move number {number}.")
        wait_settled(page, number)
        expect(page.locator("#turn-text")).to_have_value("")
    texts = [t.strip() for t in narrations(page).all_inner_texts()]
    assert [t.split("\n")[0] for t in texts] == [f"Narration number {n}." for n in range(1, 4)]
    assert Action.objects.filter(campaign=campaign, kind=Action.Kind.AI, status=Action.Status.DONE).count() == 3
    assert horizontal_overflow(page) <= 0


def test_undo_and_redo_step_over_whole_turns_and_undo_returns_the_words(page, campaign, model):
    open_play(page, campaign)
    model.script({"reply": "First told."}, {"reply": "Second told."}, {"reply": "Third told."})
    send(page, "First move.")
    wait_settled(page, 1)
    send(page, "Second move.")
    wait_settled(page, 2)
    page.locator("#undo-button").click()
    expect(page.locator("#story .action")).to_have_count(2)
    expect(page.locator("#turn-text")).to_have_value("Second move.")
    focused = page.evaluate("() => document.activeElement.id")
    assert focused in ("undo-button", "turn-text")
    page.locator("#redo-button").click()
    expect(page.locator("#story .action")).to_have_count(4)
    expect(page.locator("#turn-text")).to_have_value("")
    assert page.evaluate("() => document.activeElement.id") in ("redo-button", "turn-text")
    page.locator("#undo-button").click()
    expect(page.locator("#turn-text")).to_have_value("Second move.")
    page.locator("#turn-text").fill("A different second move.")
    page.locator("#send-button").click()
    wait_settled(page, 2)
    players = [t.strip() for t in page.locator("#story .action.player .prose").all_inner_texts()]
    assert players == ["First move.", "A different second move."]


def test_retry_and_flip_between_alternatives_on_the_narration(page, campaign, model):
    open_play(page, campaign)
    model.script({"reply": "The first telling."}, {"reply": "The second telling."})
    send(page, "I knock.")
    wait_settled(page, 1)
    narrations(page).last.locator("#retry-inline").click()
    wait_settled(page, 1)
    last = narrations(page).last
    expect(last.locator(".prose")).to_have_text("The second telling.")
    expect(last.locator(".alternatives")).to_contain_text("2 / 2")
    last.locator("#alternative-previous").click()
    expect(narrations(page).last.locator(".prose")).to_have_text("The first telling.")
    expect(narrations(page).last.locator(".alternatives")).to_contain_text("1 / 2")
    assert page.evaluate("() => document.activeElement.id") in ("alternative-next", "turn-text", "alternative-previous")
    narrations(page).last.locator("#alternative-next").click()
    expect(narrations(page).last.locator(".prose")).to_have_text("The second telling.")


def test_edit_a_narration_in_place(page, campaign, model):
    open_play(page, campaign)
    model.script({"reply": "A narration with a tpyo."})
    send(page, "I read the sign.")
    wait_settled(page, 1)
    tools = narrations(page).last.locator(".action-tools")
    expect(tools).to_be_visible()
    tools.get_by_role("link", name="Edit").click()
    box = page.get_by_label("The narration, edited")
    box.fill("A narration without a typo.")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(narrations(page).last.locator(".prose")).to_have_text("A narration without a typo.")
    assert Action.objects.get(campaign=campaign, kind=Action.Kind.AI).text == "A narration without a typo."


def test_stop_says_so_at_once_and_ends_the_narration_within_a_second(page, campaign, model):
    model.script({"reply": "It begins slowly. " + "More and more. " * 30, "delay": 0.1, "pause_after": 3, "pause": 8})
    open_play(page, campaign)
    send(page, "I wait.")
    streaming = page.locator("#story .action.ai:has(.working)")
    expect(streaming.locator(".prose")).to_contain_text("It begins", timeout=10_000)
    shown = streaming.locator(".prose").inner_text()
    started = time.monotonic()
    streaming.locator("#stop-button").click()
    expect(page.locator(".status-text")).to_have_text("Stopping…", timeout=300)
    expect(page.locator("#story .action.ai.status-stopped")).to_be_visible(timeout=3000)
    stopped_after = time.monotonic() - started
    assert stopped_after < 1.5, f"the narration ended {stopped_after:.2f} s after Stop"
    kept = page.locator("#story .action.ai.status-stopped .prose").inner_text()
    assert kept.startswith(shown.strip()[:10]) and "More and more. More and more. More and more. More" not in kept


def test_leaving_mid_narration_and_coming_back_shows_it_finished_once(page, browser, base, campaign, model):
    model.script({"reply": "A long answer that keeps on going. " * 6 + "The end of it.", "delay": 0.1})
    open_play(page, campaign)
    send(page, "I ask the ferryman.")
    expect(page.locator("#story .action.ai .prose")).to_contain_text("A long answer", timeout=10_000)
    cookies = page.context.cookies()
    page.goto("about:blank")
    deadline = time.monotonic() + 30
    while Action.objects.filter(campaign=campaign, status=Action.Status.STREAMING).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    context = browser.new_context(base_url=base)
    context.add_cookies(cookies)
    again = context.new_page()
    again.goto(f"/campaigns/{campaign.pk}/")
    text = again.locator("#story .action.ai .prose").inner_text()
    assert text.endswith("The end of it.") and text.count("The end of it.") == 1
    assert Action.objects.filter(campaign=campaign, kind=Action.Kind.AI).count() == 1
    context.close()


def test_skip_link_and_keyboard_send(page, campaign, model, width):
    open_play(page, campaign)
    page.keyboard.press("Tab")
    skip = page.locator(".skip-link")
    expect(skip).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#turn-text")).to_be_focused()
    model.script({"reply": "Sent by keyboard."})
    page.keyboard.type("I whistle.")
    page.keyboard.press("Control+Enter")
    wait_settled(page, 1)
    expect(narrations(page).last.locator(".prose")).to_have_text("Sent by keyboard.")


def test_a_second_reader_is_refused_the_campaign(other_page, campaign):
    response = other_page.goto(f"/campaigns/{campaign.pk}/")
    assert response.status == 404
    assert other_page.goto(f"/campaigns/{campaign.pk}/library/").status == 404
    assert "The Drowned Lantern" not in other_page.content()
    other_page.goto("/campaigns/")
    expect(other_page.get_by_text("The Drowned Lantern")).to_have_count(0)


def test_create_a_campaign_from_the_form(page, campaign):
    page.goto("/campaigns/new/")
    page.get_by_label("Title").fill("A Campaign Made in the Browser")
    page.get_by_role("button", name=re.compile("Create")).click()
    expect(page).to_have_url(re.compile(r"/campaigns/\d+/$"))
    expect(page.get_by_role("heading", name="A Campaign Made in the Browser")).to_be_visible()


def test_story_notes_saved_from_the_side_panel_shape_the_next_turn(page, campaign, model):
    open_play(page, campaign)
    panel = page.locator("#memory-form")
    if page.viewport_size["width"] >= 1100:
        assert panel.bounding_box()["x"] > page.locator("#story").bounding_box()["x"] + 300, "the notes sit beside the story"
    panel.get_by_label("Author's note").fill("Keep the tone hushed and cold.")
    panel.get_by_role("button", name="Save notes").click()
    expect(page.locator("#memory-form [role=status]")).to_have_text("Saved. The next turn reads them.")
    model.reset()
    model.script({"reply": "Hushed."})
    send(page, "I listen.")
    wait_settled(page, 1)
    [chat] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    assert "Keep the tone hushed and cold." in "\n".join(m["content"] for m in chat["messages"])


def test_the_branch_view_shows_undone_turns_and_jumps_back_to_them(page, campaign, model):
    open_play(page, campaign)
    model.script({"reply": "The path we leave."}, {"reply": "The path we take."})
    send(page, "I go left.")
    wait_settled(page, 1)
    page.locator("#undo-button").click()
    expect(page.locator("#story .action")).to_have_count(0)
    page.locator("#turn-text").fill("I go right.")
    page.locator("#send-button").click()
    wait_settled(page, 1)
    page.get_by_role("link", name="Branches").click()
    left = page.locator(".branch").filter(has_text="The path we leave.")
    expect(page.locator(".branch.current")).to_contain_text("The path we take.")
    left.get_by_role("button", name="Go to this branch").click()
    expect(page).to_have_url(re.compile(rf"/campaigns/{campaign.pk}/$"))
    expect(narrations(page).last.locator(".prose")).to_have_text("The path we leave.")
    assert Action.objects.filter(campaign=campaign).count() == 4


def test_delete_the_last_narration_after_confirming(page, campaign, model):
    open_play(page, campaign)
    model.script({"reply": "A narration to throw away."})
    send(page, "I sneeze.")
    wait_settled(page, 1)
    page.once("dialog", lambda dialog: dialog.accept())
    narrations(page).last.locator("#delete-button").click()
    expect(narrations(page)).to_have_count(0)
    expect(page.locator("#story .action.player")).to_have_count(1)


def test_export_the_story_from_the_page(page, campaign, model):
    open_play(page, campaign)
    model.script({"reply": "The bell tolls."})
    send(page, "I ring the bell.")
    wait_settled(page, 1)
    with page.expect_download() as download:
        page.locator(".export").get_by_role("link", name="Markdown").click()
    text = open(download.value.path()).read()
    assert text.startswith("# The Drowned Lantern") and "I ring the bell." in text and "The bell tolls." in text
    page.locator(".export").get_by_role("link", name="Page to print").click()
    expect(page.get_by_role("heading", name="The Drowned Lantern")).to_be_visible()
    expect(page.locator(".narration")).to_have_text("The bell tolls.")


def test_a_campaign_with_an_opening_scene_starts_with_it(page):
    page.goto("/campaigns/new/")
    for legend in ("Story and opening scene", "Your character", "Narrator", "Canon", "Model"):
        expect(page.locator("legend", has_text=legend)).to_be_visible()
    page.get_by_label("Title").fill("Opened in the Browser")
    page.get_by_label("Opening scene").fill("Fog sits on the harbour like a held breath.")
    page.get_by_label("Longest reply (tokens)").fill("300")
    page.get_by_role("button", name=re.compile("Create")).click()
    expect(page.locator("#story .action.ai .prose")).to_have_text("Fog sits on the harbour like a held breath.")
    assert horizontal_overflow(page) <= 0


def test_the_story_state_corrected_by_hand_reaches_the_next_turn(page, campaign, model):
    open_play(page, campaign)
    model.script({"reply": 'The ferry rocks.\n<state>{"events": [{"type": "scene", "location": "the ferry"}]}</state>'})
    send(page, "I board the ferry.")
    wait_settled(page, 1)
    panel = page.locator("#state-panel")
    panel.locator("summary").click()
    location = panel.get_by_label("Where you are")
    expect(location).to_have_value("the ferry")
    location.fill("the lighthouse stair")
    panel.get_by_role("button", name="Save state").click()
    expect(page.locator("#state-form [role=status]")).to_have_text("Saved. The next turn reads it.")
    model.reset()
    model.script({"reply": "You climb."})
    send(page, "I climb.")
    wait_settled(page, 2)
    [chat] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    assert "Location: the lighthouse stair" in chat["messages"][-1]["content"]
    expect(panel.get_by_label("Where you are")).to_have_value("the lighthouse stair")


def test_a_reader_over_the_turn_rate_is_told_so_and_keeps_the_words(page, campaign, alice, model):
    """The 429 is swapped in like any answer: its message shows, and the
    turn box still holds what the reader typed."""
    for ahead in (0, 60):  # this minute's window and the next: the turn may be sent after the minute ends
        quotas.spend(quotas.TURNS, alice.pk, amount=quotas.TURNS.limit, now=time.time() + ahead)
    open_play(page, campaign)
    send(page, "I try the door once more.")
    expect(page.locator("#story .error[role=alert]")).to_contain_text("limit of 30 turns in a minute")
    expect(page.locator("#turn-text")).to_have_value("I try the door once more.")
    assert not Action.objects.filter(campaign=campaign).exists()
    page.console_errors[:] = [e for e in page.console_errors if "429" not in e]


def test_a_thinking_model_says_so_with_its_thinking_behind_a_reveal_and_none_of_it_in_the_story(page, campaign, model):
    thinking = "The reader wants the chapel. I should describe the door first, then the bell. " * 6
    model.script({"reasoning": thinking, "reply": "The chapel door gives under your hand.", "delay": 0.15})
    open_play(page, campaign)
    send(page, "I push the chapel door.")
    streaming = page.locator("#story .action.ai.status-streaming, #story .action.ai.status-pending").first
    expect(streaming.locator(".status-text")).to_have_text("The narrator is thinking…", timeout=10_000)
    reveal = streaming.locator("details.thinking")
    expect(reveal).to_be_visible()
    expect(reveal.locator(".thinking-text")).to_be_hidden()
    reveal.locator("summary").click()
    expect(reveal.locator(".thinking-text")).to_contain_text("The reader wants the chapel.")
    assert horizontal_overflow(page) <= 0
    wait_settled(page, 1)
    done = narrations(page).first
    expect(done.locator(".prose")).to_have_text("The chapel door gives under your hand.")
    expect(done.locator("details.thinking")).to_have_count(0)
    stored = Action.objects.get(campaign=campaign, kind=Action.Kind.AI)
    assert stored.text == "The chapel door gives under your hand." and stored.thinking.startswith("The reader wants")
