"""The library's lorebook editor (issue 25, item 12): every World Info
setting the engine applies is edited and stored under SillyTavern's names
for every format, refused values are said and the reader's draft kept,
entries are added and deleted, the book's settings are saved, each change
moves the library stamp, and only the campaign's owner reaches any of it."""

from pathlib import Path

import pytest
from django import forms
from django.urls import reverse

from knowledge import selectors, services
from knowledge.forms import EntryForm
from knowledge.lorebooks.stored import expand
from knowledge.models import IndexJob, KnowledgeChunk, KnowledgeSource, LoreEntry
from knowledge.selectors import library_stamp
from tests.factories import CampaignFactory
from worldinfo.records import BookSettings

HX = {"HTTP_HX_REQUEST": "true"}
DATA = Path(__file__).parent / "lorebooks" / "data"


def posted(entry, **changes) -> dict:
    """What the entry's editor sends with `changes` made: every field as
    shown, a checkbox that is off left out, as a browser leaves it."""
    form = EntryForm.for_entry(entry)
    data = {}
    for name, field in form.fields.items():
        value = changes.get(name, form.initial.get(name))
        if isinstance(field, forms.BooleanField):
            if value:
                data[name] = "on"
        elif isinstance(value, list):
            data[name] = value
        else:
            data[name] = "" if value is None else str(value)
    return data


def imported(campaign, name) -> KnowledgeSource:
    [source] = services.sources_import(campaign=campaign, files=[(name, (DATA / name).read_bytes())]).created
    return KnowledgeSource.objects.get(pk=source.pk)


@pytest.fixture
def westhaven(campaign, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return imported(campaign, "st_westhaven.json")


def url(name, source, entry=None):
    kwargs = {"pk": source.campaign_id, "source_id": source.pk}
    return reverse(name, kwargs={**kwargs, "entry_id": entry.pk} if entry else kwargs)


def extras_of(entry) -> dict:
    return expand(LoreEntry.objects.get(pk=entry.pk).extras)


def test_the_editor_comes_when_opened_and_has_a_page_of_its_own_without_javascript(reader, westhaven):
    entry = westhaven.entries.get(title="Mira's secret")
    page = reader.get(url("source_detail", westhaven)).content.decode()
    assert 'name="probability"' not in page and f'hx-get="{url("entry_edit", westhaven, entry)}"' in page
    editor = reader.get(url("entry_edit", westhaven, entry), **HX).content.decode()
    assert editor.lstrip().startswith('<div class="entry-editor">')
    assert '<option value="4" selected>At depth</option>' in editor and 'name="depth" value="2"' in editor
    alone = reader.get(url("entry_edit", westhaven, entry)).content.decode()
    assert "<html" in alone and '<details class="entry-edit" open>' in alone and 'name="depth" value="2"' in alone


def test_every_world_info_setting_is_saved_under_sillytaverns_names(reader, westhaven, django_capture_on_commit_callbacks):
    entry = westhaven.entries.get(title="The Lantern Guild")
    changes = dict(
        secondary_keys="night, /dusk|dawn/i", selective=True, logic="3", constant=True, order=250, position="4",
        depth=7, role="2", probability=35, use_probability=True, groups="weather, town news", group_weight=40,
        group_override=True, use_group_scoring="yes", sticky=3, cooldown=2, delay=5, scan_depth=6,
        exclude_recursion=True, prevent_recursion=True, delay_until_recursion=2, case_sensitive="no",
        match_whole_words="yes", ignore_budget=True, vectorized=True, match_persona_description=True,
        match_character_description=True, match_character_personality=True, match_character_depth_prompt=True,
        match_scenario=True, match_creator_notes=True, character_names="Mira, Odo", character_exclude=True,
        triggers=["normal", "regenerate"],
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = reader.post(url("entry_edit", westhaven, entry), posted(entry, **changes), **HX)
    assert response.status_code == 200, response.content.decode()
    saved = LoreEntry.objects.get(pk=entry.pk)
    assert saved.constant and saved.secondary_keys == ["night", "/dusk|dawn/i"]
    extras = expand(saved.extras)
    assert {name: extras[name] for name in (
        "selective", "selectiveLogic", "order", "position", "depth", "role", "probability", "useProbability",
        "group", "groupWeight", "groupOverride", "useGroupScoring", "sticky", "cooldown", "delay", "scanDepth",
        "excludeRecursion", "preventRecursion", "delayUntilRecursion", "caseSensitive", "matchWholeWords",
        "ignoreBudget", "vectorized", "matchPersonaDescription", "matchCharacterDescription",
        "matchCharacterPersonality", "matchCharacterDepthPrompt", "matchScenario", "matchCreatorNotes",
        "characterFilter", "triggers", "keysecondary_regex", "position_name", "role_name", "selectiveLogic_name",
    )} == {
        "selective": True, "selectiveLogic": 3, "order": 250, "position": 4, "depth": 7, "role": 2,
        "probability": 35, "useProbability": True, "group": "weather,town news", "groupWeight": 40,
        "groupOverride": True, "useGroupScoring": True, "sticky": 3, "cooldown": 2, "delay": 5, "scanDepth": 6,
        "excludeRecursion": True, "preventRecursion": True, "delayUntilRecursion": 2, "caseSensitive": False,
        "matchWholeWords": True, "ignoreBudget": True, "vectorized": True, "matchPersonaDescription": True,
        "matchCharacterDescription": True, "matchCharacterPersonality": True, "matchCharacterDepthPrompt": True,
        "matchScenario": True, "matchCreatorNotes": True,
        "characterFilter": {"isExclude": True, "names": ["Mira", "Odo"], "tags": []},
        "triggers": ["normal", "regenerate"], "keysecondary_regex": ["/dusk|dawn/i"],
        "position_name": "at_depth", "role_name": "assistant", "selectiveLogic_name": "AND ALL",
    }
    # The editor shows them back as saved, and the card says where the entry goes.
    again = EntryForm.for_entry(saved).initial
    assert {k: again[k] for k in changes} == {k: (list(v) if isinstance(v, list) else v) for k, v in changes.items()}
    body = response.content.decode()
    assert "At depth 7 as assistant · order 250 · groups weather, town news · 35 % chance" in body


def test_opening_and_saving_an_entry_changes_none_of_its_fields(reader, westhaven, django_capture_on_commit_callbacks):
    """Null, false and 0 stay as the file wrote them: the round trip holds."""
    entry = westhaven.entries.get(title="Mira's secret")
    before = extras_of(entry)
    response = reader.post(url("entry_edit", westhaven, entry), posted(entry), **HX)
    assert response.status_code == 200
    assert extras_of(entry) == before
    assert (before["role"], before["sticky"], before["delayUntilRecursion"], before["scanDepth"]) == (None, 0, False, None)


def test_a_defaulted_entry_stays_compact_and_keeps_what_the_reader_set(reader, campaign):
    """An old file's entry keeps only what differs from the template."""
    source = services.source_index_now(imported(campaign, "st_default_eldoria.json"))
    entry = source.entries.order_by("position").first()
    assert "defaulted" in entry.extras
    response = reader.post(url("entry_edit", source, entry), posted(entry, order=300, sticky=2), **HX)
    assert response.status_code == 200
    stored = LoreEntry.objects.get(pk=entry.pk).extras
    assert stored["order"] == 300 and stored["sticky"] == 2
    assert "probability" not in stored and "groupWeight" not in stored
    assert expand(stored)["probability"] == 100


@pytest.mark.parametrize("name", ["nai_v5_saltroad.lorebook", "kobold_story_save.json", "agnai_memory_saltroad.json"])
def test_other_formats_get_the_settings_under_sillytaverns_names_too(reader, campaign, name):
    source = services.source_index_now(imported(campaign, name))
    entry = source.entries.order_by("position").first()
    # What the import mapped to SillyTavern's names (NovelAI's budget priority is its order) stays.
    order = extras_of(entry).get("order", 100)
    response = reader.post(url("entry_edit", source, entry),
                           posted(entry, position="4", depth=2, role="1", groups="rumours", sticky=4), **HX)
    assert response.status_code == 200, response.content.decode()
    extras = extras_of(entry)
    assert (extras["position"], extras["depth"], extras["role"], extras["group"], extras["sticky"]) == (4, 2, 1, "rumours", 4)
    assert extras["order"] == order and extras["probability"] == 100


def test_the_character_filter_keeps_its_tags_and_goes_when_it_filters_nothing(reader, westhaven):
    entry = westhaven.entries.get(title="Sea serpents")
    LoreEntry.objects.filter(pk=entry.pk).update(extras={
        **entry.extras, "characterFilter": {"isExclude": False, "names": ["Mira"], "tags": ["t1"]},
        "triggers": ["quiet", "normal"],
    })
    entry.refresh_from_db()
    reader.post(url("entry_edit", westhaven, entry), posted(entry, character_names="Odo", triggers=["continue"]), **HX)
    extras = extras_of(entry)
    assert extras["characterFilter"] == {"isExclude": False, "names": ["Odo"], "tags": ["t1"]}
    assert extras["triggers"] == ["quiet", "continue"]  # a trigger the editor does not offer is kept

    entry.refresh_from_db()
    LoreEntry.objects.filter(pk=entry.pk).update(extras={**entry.extras, "characterFilter": {"names": ["Odo"], "tags": []}})
    entry.refresh_from_db()
    reader.post(url("entry_edit", westhaven, entry), posted(entry, character_names="", character_exclude=False), **HX)
    # A filter of nothing is SillyTavern's default: not stored, read back as the default.
    assert "characterFilter" not in LoreEntry.objects.get(pk=entry.pk).extras
    assert extras_of(entry)["characterFilter"] == {"isExclude": False, "names": [], "tags": []}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("probability", "101", "Probability: from 0 to 100."),
    ("probability", "-1", "Probability: from 0 to 100."),
    ("depth", "1001", "Depth: from 0 to 1,000."),
    ("sticky", "-2", "Sticky: from 0 to 1,000,000."),
    ("cooldown", "1.5", "Cooldown: write a whole number."),
    ("delay", "soon", "Delay: write a whole number."),
    ("scan_depth", "5000", "Scan depth: from 0 to 1,000."),
    ("group_weight", "-5", "Group weight: from 0 to 1,000,000."),
    ("order", "-1", "Order: from 0 to 1,000,000."),
    ("delay_until_recursion", "-1", "Delay until recursion level: from 0 to 1,000."),
    ("position", "9", "Select a valid choice"),
    ("secondary_keys", "ok, /([a-z/", "regular expression"),
])
def test_a_value_out_of_range_is_refused_with_the_field_named_and_the_draft_kept(
    reader, westhaven, field, value, message
):
    entry = westhaven.entries.get(title="The Lantern Guild")
    before = extras_of(entry)
    data = {**posted(entry, title="Typed title", groups="typed group"), field: value}
    response = reader.post(url("entry_edit", westhaven, entry), data, **HX)
    body = response.content.decode()
    assert response.status_code == 400 and message in body
    assert 'class="error refusal" role="alert"' in body and '<details class="entry-edit" open>' in body
    assert 'name="title" value="Typed title"' in body and 'value="typed group"' in body
    if field != "position":
        assert f'value="{value}"' in body
    saved = LoreEntry.objects.get(pk=entry.pk)
    assert saved.title == "The Lantern Guild" and expand(saved.extras) == before


def test_a_refused_edit_without_htmx_says_why_and_goes_back_to_the_page(reader, westhaven):
    entry = westhaven.entries.get(title="The Lantern Guild")
    response = reader.post(url("entry_edit", westhaven, entry), {**posted(entry), "probability": "300"}, follow=True)
    assert response.redirect_chain[-1][0] == url("source_detail", westhaven)
    assert "The Lantern Guild: Probability: from 0 to 100." in response.content.decode()


def test_blank_numbers_take_sillytaverns_defaults_and_blank_timers_are_none(reader, westhaven):
    entry = westhaven.entries.get(title="Mira's secret")
    data = {**posted(entry), "order": "", "depth": "", "probability": "", "sticky": "", "scan_depth": ""}
    assert reader.post(url("entry_edit", westhaven, entry), data, **HX).status_code == 200
    extras = extras_of(entry)
    assert (extras["order"], extras["depth"], extras["probability"], extras["scanDepth"]) == (100, 4, 100, None)
    assert extras["sticky"] in (0, None)


def test_an_edit_changes_the_library_stamp_even_when_the_text_is_the_same(reader, westhaven):
    entry = westhaven.entries.get(title="The Lantern Guild")
    stamp = library_stamp(westhaven.campaign_id)[0]
    sha = KnowledgeSource.objects.get(pk=westhaven.pk).sha256
    assert reader.post(url("entry_edit", westhaven, entry), posted(entry, order=120), **HX).status_code == 200
    assert KnowledgeSource.objects.get(pk=westhaven.pk).sha256 == sha  # no new text, so no re-index
    assert library_stamp(westhaven.campaign_id)[0] != stamp


def test_adding_an_entry_puts_it_at_the_end_reindexes_and_moves_the_stamp(
    reader, westhaven, django_capture_on_commit_callbacks
):
    stamp = library_stamp(westhaven.campaign_id)[0]
    with django_capture_on_commit_callbacks(execute=True):
        response = reader.post(url("entry_add", westhaven), {
            "title": "The Tide Clock", "keys": "tide clock, /tides?/i", "text": "It strikes at high water.",
        }, **HX)
    body = response.content.decode()
    assert response.status_code == 200 and "Added “The Tide Clock”" in body and 'id="add-entry"' in body
    added = westhaven.entries.get(title="The Tide Clock")
    assert (added.position, added.keys, added.regex_keys, added.constant) == (6, ["tide clock"], ["/tides?/i"], False)
    extras = expand(added.extras)
    assert (extras["uid"], extras["order"], extras["position"], extras["probability"]) == (6, 100, 0, 100)
    assert f'id="entry-{added.pk}"' in body  # editable at once
    assert KnowledgeChunk.objects.get(entry=added).text == "It strikes at high water."
    assert library_stamp(westhaven.campaign_id)[0] != stamp
    exported = services.world_info_of(westhaven)
    assert exported["entries"]["6"]["comment"] == "The Tide Clock"


def test_a_new_entry_needs_a_title_or_a_text_and_keeps_the_draft(reader, westhaven):
    response = reader.post(url("entry_add", westhaven), {"title": " ", "keys": "lonely key", "text": ""}, **HX)
    body = response.content.decode()
    assert response.status_code == 400 and "Give the new entry a title or a text." in body
    assert 'value="lonely key"' in body and westhaven.entries.count() == 6


def test_adding_without_htmx_redirects_with_a_message(reader, westhaven):
    response = reader.post(url("entry_add", westhaven), {"title": "Gulls", "text": "Loud."}, follow=True)
    assert response.redirect_chain[-1][0] == url("source_detail", westhaven)
    assert "Added “Gulls”" in response.content.decode()


def test_deleting_an_entry_asks_first_then_removes_it_and_reindexes(
    reader, westhaven, django_capture_on_commit_callbacks
):
    entry = westhaven.entries.get(title="Sea serpents")
    page = reader.get(url("entry_delete", westhaven, entry))
    assert page.status_code == 200 and "Delete the entry “Sea serpents”?" in page.content.decode()
    assert westhaven.entries.filter(pk=entry.pk).exists()
    stamp = library_stamp(westhaven.campaign_id)[0]
    with django_capture_on_commit_callbacks(execute=True):
        response = reader.post(url("entry_delete", westhaven, entry), **HX)
    assert response.status_code == 200 and "Deleted “Sea serpents”" in response.content.decode()
    assert not westhaven.entries.filter(pk=entry.pk).exists()
    assert "Sea serpents" not in KnowledgeSource.objects.get(pk=westhaven.pk).content
    assert IndexJob.objects.filter(source=westhaven).count() == 2
    assert library_stamp(westhaven.campaign_id)[0] != stamp


def test_deleting_without_htmx_redirects_with_a_message(reader, westhaven):
    entry = westhaven.entries.get(title="Sea serpents")
    response = reader.post(url("entry_delete", westhaven, entry), follow=True)
    assert "Deleted “Sea serpents”" in response.content.decode()


def test_the_book_settings_are_stored_as_book_settings_and_move_the_stamp(reader, westhaven):
    stamp = library_stamp(westhaven.campaign_id)[0]
    sha = KnowledgeSource.objects.get(pk=westhaven.pk).sha256
    response = reader.post(url("book_settings", westhaven), {
        "scan_depth": "5", "budget_percent": "30", "budget_cap": "900", "recursive": "on",
        "max_recursion_steps": "3", "min_activations": "2", "min_activations_depth_max": "20",
        "match_whole_words": "on", "use_group_scoring": "on", "include_names": "on",
    }, **HX)
    assert response.status_code == 200 and "Saved." in response.content.decode()
    source = KnowledgeSource.objects.get(pk=westhaven.pk)
    assert BookSettings.from_stored(source.metadata["world_info"]) == BookSettings(
        scan_depth=5, budget_percent=30, budget_cap=900, recursive=True, max_recursion_steps=3, min_activations=2,
        min_activations_depth_max=20, case_sensitive=False, match_whole_words=True, use_group_scoring=True,
        include_names=True, vectorize_all=False,
    )
    assert source.metadata["name"] == "Westhaven"  # the rest of the metadata is kept
    assert source.sha256 == sha and library_stamp(westhaven.campaign_id)[0] != stamp
    page = reader.get(url("source_detail", westhaven)).content.decode()
    assert 'name="scan_depth" value="5"' in page and 'name="budget_cap" value="900"' in page


@pytest.mark.parametrize(("field", "value", "message"), [
    ("scan_depth", "1001", "Scan depth: from 0 to 1,000."),
    ("budget_percent", "0", "Budget: from 1 to 100."),
    ("budget_cap", "-1", "Budget cap: from 0 to 1,000,000."),
    ("max_recursion_steps", "x", "Max recursion steps: write a whole number."),
    ("min_activations", "", "Min activations: write a whole number."),
])
def test_book_settings_out_of_range_are_refused_and_the_draft_kept(reader, westhaven, field, value, message):
    data = {"scan_depth": "3", "budget_percent": "25", "budget_cap": "0", "max_recursion_steps": "0",
            "min_activations": "0", "min_activations_depth_max": "0", "recursive": "on", field: value}
    response = reader.post(url("book_settings", westhaven), data, **HX)
    body = response.content.decode()
    assert response.status_code == 400 and message in body and 'class="error refusal" role="alert"' in body
    assert 'id="book-settings" open' in body and 'name="recursive" id="book-recursive" checked' in body
    assert "world_info" not in KnowledgeSource.objects.get(pk=westhaven.pk).metadata


def test_a_text_source_has_no_entries_to_add_and_no_book_settings(reader, campaign):
    [source] = services.sources_import(campaign=campaign, files=[("notes.md", b"# Notes\n\nThe harbour.")]).created
    assert reader.post(url("entry_add", source), {"title": "X", "text": "Y"}).status_code == 404
    assert reader.post(url("book_settings", source), {"scan_depth": "2"}).status_code == 404


def test_another_reader_reaches_no_editor_of_the_book(reader, campaign, westhaven, bob):
    entry = westhaven.entries.get(title="The Lantern Guild")
    data = posted(entry, title="Mine")
    reader.logout()
    reader.force_login(bob)
    mine = CampaignFactory(owner=bob)
    for pk in (campaign.pk, mine.pk):
        kwargs = {"pk": pk, "source_id": westhaven.pk}
        with_entry = {**kwargs, "entry_id": entry.pk}
        assert reader.post(reverse("entry_edit", kwargs=with_entry), data).status_code == 404
        assert reader.get(reverse("entry_edit", kwargs=with_entry), **HX).status_code == 404
        assert reader.get(reverse("entry_delete", kwargs=with_entry)).status_code == 404
        assert reader.post(reverse("entry_delete", kwargs=with_entry)).status_code == 404
        assert reader.post(reverse("entry_add", kwargs=kwargs), {"title": "Mine"}).status_code == 404
        assert reader.post(reverse("book_settings", kwargs=kwargs), {"scan_depth": "9"}).status_code == 404
    source = KnowledgeSource.objects.get(pk=westhaven.pk)
    assert source.entries.count() == 6 and source.entries.get(pk=entry.pk).title == "The Lantern Guild"
    assert "world_info" not in source.metadata


def test_the_export_carries_the_edited_settings(reader, westhaven):
    entry = westhaven.entries.get(title="The Lantern Guild")
    reader.post(url("entry_edit", westhaven, entry), posted(entry, position="4", depth=3, sticky=2, groups="g"), **HX)
    written = services.world_info_of(westhaven)["entries"]["0"]
    assert (written["position"], written["depth"], written["sticky"], written["group"]) == (4, 3, 2, "g")


def test_an_entrys_kept_settings_leave_out_what_the_editor_edits(westhaven):
    names = {name for name, _ in selectors.entry_view(westhaven.entries.get(title="Sea serpents")).kept}
    assert "addMemo" in names and "automationId" in names
    assert not names & {"probability", "position", "depth", "role", "sticky", "group", "order", "scanDepth"}


def test_triggers_ticked_as_the_file_had_them_keep_the_files_order(reader, westhaven):
    entry = westhaven.entries.get(title="Sea serpents")
    LoreEntry.objects.filter(pk=entry.pk).update(extras={**entry.extras, "triggers": ["regenerate", "normal"]})
    entry.refresh_from_db()
    reader.post(url("entry_edit", westhaven, entry), posted(entry), **HX)
    assert extras_of(entry)["triggers"] == ["regenerate", "normal"]
    reader.post(url("entry_edit", westhaven, entry), posted(entry, triggers=[]), **HX)
    assert extras_of(entry)["triggers"] == []


@pytest.mark.parametrize("name", ["st_westhaven.json", "st_default_eldoria.json", "chub_lorebook_saltroad.json"])
def test_saving_every_entry_unchanged_leaves_the_export_as_it_was(reader, campaign, name):
    source = services.source_index_now(imported(campaign, name))
    before = services.world_info_of(source)
    for entry in source.entries.all():
        assert reader.post(url("entry_edit", source, entry), posted(entry), **HX).status_code == 200
    assert services.world_info_of(source) == before


def test_an_entry_is_marked_known_to_one_seat_in_its_editor(reader, westhaven, django_capture_on_commit_callbacks):
    entry = westhaven.entries.get(title="The Lantern Guild")
    with django_capture_on_commit_callbacks(execute=True):
        response = reader.post(url("entry_edit", westhaven, entry), posted(entry, secret_seat=" Ivo "), **HX)
    assert response.status_code == 200
    saved = LoreEntry.objects.get(pk=entry.pk)
    assert saved.secret_seat == "Ivo" and "secret_seat" not in expand(saved.extras)
    editor = reader.get(url("entry_edit", westhaven, entry), **HX).content.decode()
    assert 'name="secret_seat" value="Ivo"' in editor
