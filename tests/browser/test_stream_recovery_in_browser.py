"""A stream the server refuses (issue 23, finding 9): while Redis was down
the stream answered 500, the sse extension backed off to a minute, and
finished narrations kept their spinner until a reload. Now the page fetches
the story again a few seconds after a refused stream, by itself."""

from playwright.sync_api import expect

from tests.browser.test_play_in_browser import open_play, send


def test_a_finished_narration_settles_though_its_stream_is_refused(page, campaign, model):
    model.script({"reply": "The lamp gutters and the fog comes in.\n<state>{\"events\": []}</state>"})
    page.route("**/stream/**", lambda route: route.fulfill(status=503, headers={"Retry-After": "5"},
                                                           body="Loremaster is busy"))
    open_play(page, campaign)
    send(page, "I light the lamp.")
    done = page.locator("#story .action.ai.status-done")
    expect(done).to_have_count(1, timeout=10_000)
    expect(done.locator(".prose")).to_contain_text("The lamp gutters")
    expect(page.locator("#story .working")).to_have_count(0)
    # The refused streams, and htmx logging each sseError, are the console
    # errors this test means to cause.
    page.console_errors[:] = [e for e in page.console_errors if "503" not in e and "[object Event]" not in e]
