"""What just happened is where the reader is looking, at 1280 and 390 px:
the newest narration and its tools above the sticky turn box (on opening
the page, after a turn, after a failed Retry), and every form's refusal
scrolled into view and focused, with what the reader typed kept."""

from pathlib import Path

from playwright.sync_api import expect

from knowledge.models import KnowledgeSource
from tests.factories import story

DATA = Path(__file__).parents[1] / "knowledge" / "lorebooks" / "data"
LONG = "The fog lifts a little from the quay, then settles again over the boats and the chains. " * 3


def long_story(campaign) -> None:
    """A story several screens long, ending in a narration."""
    story(campaign, *[f"Move {n}. I walk on." if n % 2 == 0 else f"Telling {n}. {LONG}" for n in range(16)])


def assert_in_view(page, locator, *, above_turn_box: bool = True) -> None:
    """The element is wholly inside the window and, on the play page, not under the turn box."""
    box = locator.bounding_box()
    top, bottom = box["y"], box["y"] + box["height"]
    height = page.viewport_size["height"]
    assert -0.5 <= top and bottom <= height + 0.5, f"{top:.0f}–{bottom:.0f} is outside the {height} px window"
    if above_turn_box:
        turn = page.locator("#turn-form").bounding_box()["y"]
        assert bottom <= turn + 0.5, f"{top:.0f}–{bottom:.0f} is under the turn box, which starts at {turn:.0f}"


def newest_tools(page):
    return page.locator("#story .action.ai").last.locator(".action-tools")


def forget_refusal_statuses(page, *codes: int) -> None:
    """The browser logs each 4xx answer; a refusal the test asked for is not an error."""
    page.console_errors[:] = [e for e in page.console_errors if not any(f"status of {c}" in e for c in codes)]


def test_the_newest_narration_and_its_tools_sit_above_the_turn_box_on_opening_and_after_a_turn(
    page, campaign, model
):
    long_story(campaign)
    page.goto(f"/campaigns/{campaign.pk}/")
    expect(newest_tools(page)).to_be_visible()
    assert_in_view(page, newest_tools(page))
    model.script({"reply": f"The bell answers. {LONG}", "delay": 0.01})
    page.locator("#turn-text").fill("I ring the bell.")
    page.locator("#send-button").click()
    expect(page.locator("#story .action.ai.status-done")).to_have_count(9, timeout=20_000)
    expect(page.locator("#story .action.ai").last.locator(".prose")).to_contain_text("The bell answers.")
    assert_in_view(page, newest_tools(page))
    assert_in_view(page, page.locator("#story .controls"))


def test_a_failed_retry_shows_its_error_and_tools_above_the_turn_box(page, campaign, model):
    long_story(campaign)
    model.script({"status": 500})
    page.goto(f"/campaigns/{campaign.pk}/")
    page.locator("#retry-inline").click()
    failed = page.locator("#story .action.ai.status-failed")
    expect(failed).to_have_count(1, timeout=20_000)
    assert_in_view(page, failed.locator(".error"))
    assert_in_view(page, failed.locator(".action-tools"))


def test_the_turn_box_counts_near_the_limit_and_a_longer_action_is_refused_in_view_and_kept(page, campaign):
    long_story(campaign)
    page.goto(f"/campaigns/{campaign.pk}/")
    box, count = page.locator("#turn-text"), page.locator("#turn-count")
    box.fill("a" * 3000)
    expect(count).to_be_hidden()
    box.fill("a" * 3700)
    expect(count).to_have_text("300 characters left")
    pasted = "b" * 4500
    box.fill(pasted)
    expect(count).to_contain_text("500 characters over the limit of 4,000")
    page.locator("#send-button").click()
    refusal = page.locator("#story .refusal")
    expect(refusal).to_contain_text("at most 4000 characters (it has 4500)")
    expect(refusal).to_be_focused()
    assert_in_view(page, refusal)
    assert box.input_value() == pasted, "the box cut what the reader pasted"
    forget_refusal_statuses(page, 400)


def test_refusals_on_the_library_pages_show_in_view_with_what_was_typed(page, campaign):
    page.goto(f"/campaigns/{campaign.pk}/library/")
    page.locator("#upload-files").set_input_files(str(DATA / "st_westhaven.json"))
    page.locator("#upload-button").click()
    expect(page.locator(".source-state .badge.ok")).to_have_count(1, timeout=30_000)
    source = KnowledgeSource.objects.get(campaign=campaign)

    # A source's row: Always include is for Canon only.
    page.goto(f"/campaigns/{campaign.pk}/library/")
    row = page.locator(f"#source-{source.pk}")
    row.locator("select[name=classification]").select_option("reference")
    row.locator("input[name=always_include]").check()
    row.get_by_role("button", name="Save", exact=True).click()
    refusal = page.locator(f"#source-{source.pk} .refusal")
    expect(refusal).to_contain_text("Only Canon sources can be always included.")
    expect(refusal).to_be_focused()
    assert_in_view(page, refusal, above_turn_box=False)
    expect(page.locator(f"#source-{source.pk} select[name=classification]")).to_have_value("reference")
    expect(page.locator(f"#source-{source.pk} input[name=always_include]")).to_be_checked()

    # An entry's keys with a broken pattern.
    page.goto(f"/campaigns/{campaign.pk}/library/{source.pk}/")
    guild = page.locator(".entry", has_text="The Lantern Guild")
    entry_id = guild.get_attribute("id")
    guild.locator("summary", has_text="Edit").click()
    guild.locator("input[name=keys]").fill("glade, /([a-z/")
    guild.get_by_role("button", name="Save entry").click()
    refusal = page.locator(f"#{entry_id} .refusal")
    expect(refusal).to_contain_text("regular expression")
    expect(refusal).to_be_focused()
    assert_in_view(page, refusal, above_turn_box=False)
    expect(page.locator(f"#{entry_id} input[name=keys]")).to_have_value("glade, /([a-z/")
    forget_refusal_statuses(page, 400)


def test_a_streaming_narration_keeps_its_end_above_the_turn_box_as_it_grows(page, campaign, model):
    long_story(campaign)
    model.script({"reply": " ".join(f"Wave {n} breaks on the stones." for n in range(60)), "delay": 0.03})
    page.goto(f"/campaigns/{campaign.pk}/")
    page.locator("#turn-text").fill("I watch the sea.")
    page.locator("#send-button").click()
    streaming = page.locator("#story .action.ai:has(.working)")
    expect(streaming.locator(".prose")).to_contain_text("Wave 40", timeout=15_000)
    assert_in_view(page, streaming.locator(".working"))
    expect(page.locator("#story .action.ai.status-done")).to_have_count(9, timeout=20_000)
    assert_in_view(page, newest_tools(page))
