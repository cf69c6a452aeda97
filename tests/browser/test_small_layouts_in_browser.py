"""Smaller layout faults of issue 24, at 1280 and 390 px: a source's long
title leaves "Back to the library" on one line beside or under it, "Clear"
stays beside Upload, a worker id is never broken inside, and a bad URL gets
the site's page with the way back, none of them wider than the screen."""

import re

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from knowledge.models import IndexJob
from tests.browser.helpers import horizontal_overflow
from tests.factories import EndpointProfileFactory, IndexJobFactory, KnowledgeSourceFactory

#: The text's lines as laid out: one client rect per line box it spans.
LINES = """el => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
}"""


def middle(box: dict) -> float:
    return box["y"] + box["height"] / 2


def overlap(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


def test_a_long_source_title_leaves_the_way_back_whole(page, campaign, library):
    source = library(campaign, "# The Drowned Lantern of the Tide-Priests, Its Wardens and Their Keepers\n\n"
                     "The lantern burns without oil whenever a ship is lost.", filename="lantern.md")
    page.goto(f"/campaigns/{campaign.pk}/library/{source.pk}/")
    title, back = page.locator(".page-head h1"), page.get_by_role("link", name="Back to the library")
    expect(back).to_be_visible()
    assert back.evaluate(LINES) == 1, "the link is broken over several lines"
    assert not overlap(title.bounding_box(), back.bounding_box()), "the title runs into the link"
    assert horizontal_overflow(page) <= 0


def test_clear_stays_beside_upload_after_choosing_files(page, campaign, tmp_path):
    lore = tmp_path / "lantern.md"
    lore.write_text("# Lantern\n\nIt burns.")
    page.goto(f"/campaigns/{campaign.pk}/library/")
    page.locator("#upload-files").set_input_files(str(lore))
    clear = page.locator("#upload-clear")
    expect(clear).to_be_visible()
    upload, cleared = page.locator("#upload-button").bounding_box(), clear.bounding_box()
    assert abs(middle(upload) - middle(cleared)) < 4, f"Clear wrapped: {upload} vs {cleared}"
    assert cleared["x"] > upload["x"]
    assert horizontal_overflow(page) <= 0


def test_a_worker_id_is_never_broken_on_the_jobs_page(page, campaign):
    User.objects.filter(username="alice").update(is_staff=True)
    started = timezone.now()
    source = KnowledgeSourceFactory(campaign=campaign, title="Westhaven", original_filename="w" * 90 + ".json")
    IndexJobFactory(source=source, state=IndexJob.State.DONE, worker="vm:14674", started=started, finished=started,
                    error="Traceback: " + "x" * 300)
    page.goto("/ops/jobs/")
    worker = page.locator(".job-id", has_text="vm:14674")
    expect(worker).to_be_visible()
    assert worker.evaluate(LINES) == 1, "the worker id breaks inside"
    row = page.locator("tr.job").first
    for part in (row.locator(".job-id").first, row.locator("td").first.locator(".meta")):
        assert part.evaluate(LINES) == 1, f"{part.inner_text()!r} breaks inside"
    assert horizontal_overflow(page) <= 0, "a long file name or error widens the page"


def test_a_bad_url_gets_the_sites_page_with_the_way_back(page):
    response = page.goto("/campaigns/no-such-page/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Nothing is here")).to_be_visible()
    back = page.get_by_role("link", name="Back to your campaigns")
    expect(back).to_be_in_viewport()
    back.click()
    expect(page.get_by_role("heading", name="Your campaigns")).to_be_visible()
    assert horizontal_overflow(page) <= 0
    # The browser logs the 404 it was asked to fetch; that one is this test's point.
    page.console_errors[:] = [e for e in page.console_errors if "404" not in e]


def test_the_admin_asks_for_no_icon_it_lacks(page):
    User.objects.filter(username="alice").update(is_staff=True, is_superuser=True)
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    for path in ("/admin/", "/admin/endpoints/endpointprofile/", "/campaigns/"):
        assert page.goto(path).status == 200, path
    assert page.locator('link[rel="icon"]').get_attribute("href") == "/static/favicon.svg"
    assert not missing, f"404s: {missing}"


def test_the_profile_page_after_a_save_shows_what_the_server_said_without_a_reload(page, model, width):
    """The worker probes the saved profile; the page says "Checking…" until
    it has and then the window, or shows the window at once if it was quick.

    Once, at one width: the admin's save logs a LogEntry, whose content type
    the web process caches by id, and the flush between tests makes new ids."""
    if width != "desktop":
        pytest.skip("behaviour, not layout: one width")
    User.objects.filter(username="alice").update(is_staff=True, is_superuser=True)
    profile = EndpointProfileFactory(base_url=model.base_url, name="Loopback narrator")
    page.goto(f"/admin/endpoints/endpointprofile/{profile.pk}/change/")
    page.get_by_role("button", name="Save and continue editing").click()
    line = page.locator(".field-server_window .readonly")
    expect(line).to_contain_text(re.compile(r"Checking…|tokens, from llama.cpp /props"))
    assert "Not asked yet" not in line.inner_text()
    expect(line).to_contain_text("32,768 tokens, from llama.cpp /props", timeout=20_000)
