"""The library, the inspector and every page at phone width, in Chromium:
lore stored with the options shown beside it, the inspector's table inside
its card with each header on one line, no horizontal overflow at 390 px, and no serious or critical
axe-core findings."""

import re

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from knowledge.models import IndexJob, KnowledgeChunk, KnowledgeSource
from storyapp import services
from tests.browser.helpers import axe_violations, horizontal_overflow, log_in
from tests.factories import IndexJobFactory, KnowledgeSourceFactory, UserFactory

LANTERN = """# The Drowned Lantern

The drowned lantern hangs in the chapel of the tide-priests. Its glass is
green with brine, and it burns without oil whenever a ship is lost at sea.

## The warden

Sister Orrin, the lantern-warden, trims a wick that is never consumed.
"""
SECRET = """# Orrin's Secret

Sister Orrin drowned the lantern's first keeper to take the wick for herself.
The lantern remembers the chapel bell and the drowned keeper's name.
"""


def played(campaign, text):
    """A turn set up for a page test: narrated in this process (tasks run
    eagerly here), committed, so the web server shows it."""
    _, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
    narration.refresh_from_db()
    assert narration.status == "done", narration.error
    return narration


def wait_ready(page, campaign, count):
    page.goto(f"/campaigns/{campaign.pk}/library/")
    expect(page.locator(".source-state .badge.ok")).to_have_count(count, timeout=30_000)


def test_picked_files_are_stored_with_the_options_set_after_picking(page, campaign, tmp_path):
    lore = tmp_path / "lantern.md"
    lore.write_text(LANTERN)
    page.goto(f"/campaigns/{campaign.pk}/library/")
    page.locator("#upload-files").set_input_files(str(lore))
    expect(page.locator("#chosen-files")).to_contain_text("lantern.md")
    expect(page.locator("#chosen-summary")).to_contain_text("1 file chosen, not yet uploaded")
    assert not KnowledgeSource.objects.exists(), "choosing a file must not upload it"
    page.locator("#id_classification").select_option("canon")
    page.locator("#id_visibility").select_option("hidden")
    page.locator("#upload-button").click()
    expect(page.locator(".upload-outcome")).to_contain_text("Imported 1 file: lantern")
    expect(page.locator("#id_classification")).to_have_value("canon")
    expect(page.locator("#id_visibility")).to_have_value("hidden")
    expect(page.locator("#chosen")).to_be_hidden()
    # The worker reads the file; its own title arrives with the ready state.
    expect(page.locator(".source-state .badge.ok")).to_have_count(1, timeout=30_000)
    source = KnowledgeSource.objects.get()
    assert (source.classification, source.visibility, source.title) == ("canon", "hidden", "The Drowned Lantern")


def test_dropped_files_wait_for_upload_and_take_the_options_shown(page, campaign):
    page.goto(f"/campaigns/{campaign.pk}/library/")
    page.evaluate("""(text) => {
        const transfer = new DataTransfer();
        transfer.items.add(new File([text], "dropped.md", {type: "text/markdown"}));
        const zone = document.getElementById("dropzone");
        zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: transfer, bubbles: true, cancelable: true}));
        zone.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer, bubbles: true, cancelable: true}));
    }""", SECRET)
    expect(page.locator("#chosen-files")).to_contain_text("dropped.md")
    assert not KnowledgeSource.objects.exists()
    page.locator("#id_classification").select_option("inspiration")
    page.locator("#upload-button").click()
    expect(page.locator(".upload-outcome")).to_contain_text("Imported 1 file")
    assert KnowledgeSource.objects.get().classification == "inspiration"


def test_upload_without_files_asks_for_them_and_a_bad_file_is_refused_clearly(page, campaign, tmp_path):
    page.goto(f"/campaigns/{campaign.pk}/library/")
    page.locator("#upload-button").click()
    expect(page.locator(".upload-outcome")).to_contain_text("Choose one or more files to upload.")
    # The refusal is a 400 (the browser logs it), swapped in and focused.
    expect(page.locator(".upload-outcome .refusal")).to_be_focused()
    page.console_errors[:] = [e for e in page.console_errors if "status of 400" not in e]
    bad = tmp_path / "broken.md"
    bad.write_bytes(b"\xff\xfe\x00 not utf-8 \x81")
    page.locator("#upload-files").set_input_files(str(bad))
    page.locator("#upload-button").click()
    # The worker reads the file and refuses it: the row says why, nothing of it is indexed.
    expect(page.locator(".source-state .error")).to_contain_text("broken.md", timeout=30_000)
    assert KnowledgeSource.objects.get().index_state == "failed"
    assert not KnowledgeChunk.objects.exists()


def test_the_inspector_fits_its_card_lists_rejections_and_closes_on_escape(page, campaign, model, library):
    library(campaign, LANTERN, filename="lantern.md")
    library(campaign, SECRET, filename="secret.md", visibility="hidden")
    library(campaign, "# Weather\n\nThe fog over the chapel lifts at noon.", filename="weather.md")
    campaign.initial_state = {"scene": {"summary": "Ysolde enters the chapel of the tide-priests.",
                                        "location": "the drowned chapel"}}
    campaign.save()
    narration = played(campaign, "I look for the drowned lantern and its warden in the chapel.")
    page.goto(f"/campaigns/{campaign.pk}/")
    page.locator(f"#action-{narration.pk} .context-link").click()
    inspector = page.locator(f"#inspector-{narration.pk}")
    expect(inspector).to_be_visible()
    expect(inspector).to_be_focused()
    expect(inspector).to_contain_text("The scene's terms found")
    table = inspector.locator("table.passages")
    if table.count():
        fits = table.evaluate("t => t.scrollWidth <= t.closest('.inspector').clientWidth + 1")
        assert fits, "the passage table is wider than its card"
        if page.viewport_size["width"] > 640:
            expect(table.locator("thead th").last).to_be_in_viewport()
            broken = table.evaluate("""t => [...t.querySelectorAll('thead th')].filter(th => {
                const words = document.createRange();
                words.selectNodeContents(th);
                const line = parseFloat(getComputedStyle(th).lineHeight);
                return words.getBoundingClientRect().height > 1.5 * line || th.scrollWidth > th.clientWidth + 1;
            }).map(th => th.textContent)""")
            assert not broken, f"column headers broken over two lines or cut off: {broken}"
    expect(inspector.locator("summary").filter(has_text="Plot essentials")).to_have_count(1)
    assert "state_rule</summary>" not in inspector.inner_html()
    for hidden in inspector.locator("details.spoiler pre").all():
        assert not hidden.is_visible(), "narrator-only text is shown before the reader asks for it"
    assert horizontal_overflow(page) <= 0
    page.keyboard.press("Escape")
    expect(inspector).to_have_count(0)
    expect(page.locator(f"#action-{narration.pk} .context-link")).to_be_focused()


def test_no_page_is_wider_than_a_phone(page, campaign, model, library, width):
    if width != "phone":
        pytest.skip("the phone-width check")
    source = library(campaign, LANTERN, filename="a-rather-long-file-name-for-the-drowned-lantern-lore.md")
    narration = played(campaign, "I study the lantern.")
    User.objects.filter(username="alice").update(is_staff=True, is_superuser=True)
    IndexJobFactory(source=source, state=IndexJob.State.FAILED, error="Traceback (most recent call last): " + "x" * 400)
    pages = [
        "/campaigns/", "/campaigns/new/", f"/campaigns/{campaign.pk}/", f"/campaigns/{campaign.pk}/edit/",
        f"/campaigns/{campaign.pk}/library/", f"/campaigns/{campaign.pk}/library/{source.pk}/",
        f"/campaigns/{campaign.pk}/actions/{narration.pk}/context/", "/ops/jobs/", "/models/",
        f"/campaigns/{campaign.pk}/branches/", f"/campaigns/{campaign.pk}/export/story.html",
    ]
    wide = {}
    for path in pages:
        response = page.goto(path)
        assert response.status == 200, path
        overflow = horizontal_overflow(page)
        if overflow > 0:
            wide[path] = overflow
    assert not wide, f"pages wider than 390 px, by px: {wide}"
    page.goto(f"/campaigns/{campaign.pk}/")
    tools = page.locator(f"#action-{narration.pk} .action-tools")
    expect(tools.get_by_role("link", name="Context")).to_be_visible()
    expect(tools.get_by_role("link", name="Edit")).to_be_visible()
    prose = page.locator(f"#action-{narration.pk} .prose").bounding_box()
    box = tools.bounding_box()
    assert box["y"] >= prose["y"] + prose["height"] - 1, "the tools cover the narration"
    brand = page.locator(".brand").bounding_box()
    first_link = page.locator(".topbar nav a").first.bounding_box()
    overlaps = not (brand["x"] + brand["width"] <= first_link["x"] or first_link["y"] >= brand["y"] + brand["height"])
    assert not overlaps, "the top bar runs into the brand"


@pytest.mark.parametrize("which", ["play", "library", "inspector", "campaign form"])
def test_no_serious_accessibility_findings(page, campaign, model, library, which):
    library(campaign, LANTERN, filename="lantern.md")
    narration = played(campaign, "I study the lantern.")
    path = {
        "play": f"/campaigns/{campaign.pk}/",
        "library": f"/campaigns/{campaign.pk}/library/",
        "inspector": f"/campaigns/{campaign.pk}/actions/{narration.pk}/context/",
        "campaign form": f"/campaigns/{campaign.pk}/edit/",
    }[which]
    page.goto(path)
    if which == "play":
        page.locator(f"#action-{narration.pk} .context-link").click()
        expect(page.locator(".play .inspector")).to_be_visible()
    found = axe_violations(page)
    assert not found, f"axe-core on the {which} page: {found}"
    if which == "campaign form":
        broken = page.evaluate("""() => [...document.querySelectorAll('[aria-describedby]')]
            .flatMap(el => el.getAttribute('aria-describedby').split(/\\s+/))
            .filter(id => !document.getElementById(id))""")
        assert not broken, f"aria-describedby points at missing ids: {broken}"


def test_the_job_monitor_reads_like_a_person_wrote_it(page, campaign):
    User.objects.filter(username="alice").update(is_staff=True)
    source = KnowledgeSourceFactory(campaign=campaign)
    started = timezone.now()
    IndexJobFactory(source=source, state=IndexJob.State.DONE, started=started,
                    finished=started + timezone.timedelta(milliseconds=21))
    page.goto("/ops/jobs/")
    row = page.locator("tr.job").first
    expect(row).to_contain_text("took 0.02 s")
    expect(row.get_by_role("button", name="Retry")).to_have_count(0)
    assert not re.search(r"\d:\d\d:\d\d\.\d{6}", page.content())


def test_passages_are_numbered_from_one_everywhere(page, campaign, library):
    source = library(campaign, LANTERN, filename="lantern.md")
    page.goto(f"/campaigns/{campaign.pk}/library/{source.pk}/")
    expect(page.locator(".passage .meta").first).to_contain_text("passage 1 ")


def test_another_readers_actions_and_inspector_are_refused(other_page, campaign, model):
    narration = played(campaign, "I hide the key.")
    for path in (f"/campaigns/{campaign.pk}/actions/{narration.pk}/context/",
                 f"/campaigns/{campaign.pk}/actions/{narration.pk}/edit/",
                 f"/campaigns/{campaign.pk}/actions/{narration.pk}/stream/"):
        assert other_page.goto(path).status == 404, path
    other_page.goto(f"/campaigns/{campaign.pk}/")
    assert narration.text not in other_page.content()


def test_a_reader_logs_in_through_the_form(browser, base, settings):
    """The one browser test that types a password: the others are given a
    session. The live servers check passwords with the default hasher, so
    this reader's is made with it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    UserFactory(username="dora")
    context = browser.new_context(base_url=base)
    page = context.new_page()
    log_in(page, "dora")
    expect(page.get_by_role("heading", name="Your campaigns")).to_be_visible()
    context.close()
