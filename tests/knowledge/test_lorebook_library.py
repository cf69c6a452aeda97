"""Lorebooks in the library: every format imports as one source whose
entries keep their titles, keys and flags, World Info activates them by
their keys (retrieval leaves lorebook passages to it), and what a format
carries that Loremaster does not use is kept."""

import json
from pathlib import Path

import pytest

from contextbuild.tokens import count_tokens
from knowledge import retrieval, services
from knowledge.models import KnowledgeSource, LoreEntry
from knowledge.query import QueryInputs
from knowledge.retrieval import retrieve
from knowledge.worldinfo import loading
from worldinfo.engine import evaluate
from worldinfo.records import AT_DEPTH, Inputs, Message

DATA = Path(__file__).parent / "lorebooks" / "data"


@pytest.fixture(autouse=True)
def fresh_cache():
    retrieval.clear_cache()
    yield
    retrieval.clear_cache()


def imported(campaign, *names, **options):
    result = services.sources_import(
        campaign=campaign, files=[(n, (DATA / n).read_bytes()) for n in names], enqueue=False, **options
    )
    assert not result.problems, result.problems
    return [services.source_index_now(s) for s in result.created], result


def ask(campaign, *recent, persona="Mara", state=None):
    inputs = QueryInputs.build(state=state or {}, recent=list(recent), persona_name=persona)
    return retrieve(campaign_id=campaign.pk, query=inputs)


def titles(result):
    return sorted(c.heading_path for c in result.candidates)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir()))
def test_every_fixture_imports_as_one_canon_source_with_every_entry(campaign, name):
    from knowledge.lorebooks import read
    from knowledge.lorebooks.cards import with_macros_filled

    book = with_macros_filled(read((DATA / name).read_bytes(), name=name))
    [source], result = imported(campaign, name)
    assert source.format == book.format
    assert source.classification == KnowledgeSource.Classification.CANON
    assert source.index_state == KnowledgeSource.IndexState.READY
    stored = list(source.entries.order_by("position"))
    assert len(stored) == len(book.entries)
    for row, entry in zip(stored, book.entries, strict=True):
        assert (row.title, row.text, row.keys, row.regex_keys, row.enabled, row.constant) == (
            entry.title, entry.text, list(entry.keys), list(entry.regex_keys), entry.enabled, entry.constant
        )
    # One passage or more per enabled entry with text; disabled ones are kept, not searched.
    with_text = [e for e in book.entries if e.enabled and e.text.strip()]
    assert len(with_text) <= source.passage_count
    assert {c.entry.position for c in source.chunks.select_related("entry")} == {
        i for i, e in enumerate(book.entries) if e.enabled and e.text.strip()
    }
    assert result.reports and source.title in result.reports[0]


def test_world_info_flags_arrive_and_unused_fields_are_kept_and_reported(campaign):
    [source], result = imported(campaign, "st_westhaven.json")
    entries = {e.title: e for e in source.entries.all()}
    assert entries["The salt wind"].constant
    assert not entries["The Old Lighthouse (draft)"].enabled
    assert entries["Sea serpents"].regex_keys == ["/sea ?serpents?/i"]
    assert entries["Mira's secret"].extras["position"] == 4 and entries["Mira's secret"].extras["depth"] == 2
    assert entries["Sea serpents"].extras["probability"] == 80
    # What World Info applies is not reported unused; the file's own book settings are.
    assert not {"depth", "position", "probability", "group"} & set(source.metadata["unused"])
    assert "scan_depth" in source.metadata["unused"]
    assert source.metadata["extras"]["description"] == "The harbour city"
    [line] = result.reports
    assert "6 entries, 1 disabled, 1 always included" in line and "probability" not in line
    # A disabled entry is kept, and not searched: five entries with text have passages.
    assert source.passage_count == 5
    assert all(c.entry_id for c in source.chunks.all())


def lore(campaign, *recent, persona="Mara"):
    """Each entry's World Info decision for a story of these messages (the
    newest last), by title."""
    books, patterns = loading.books_for(campaign.pk)
    messages = tuple(Message(persona, text) for text in reversed(recent))
    inputs = Inputs(entries=books.entries, books=books.settings, messages=messages, chat_length=len(recent),
                    budget_tokens=8192, seed="library", names=(persona,) if persona else ())
    result = evaluate(inputs, count=count_tokens, regex_search=loading.TurnRegex(patterns))
    return {d.entry: d for d in result.decisions}


def fired(campaign, *recent, persona="Mara") -> set[str]:
    return {title for title, d in lore(campaign, *recent, persona=persona).items() if d.activated}


def test_a_scene_that_names_a_key_activates_its_entry_and_retrieval_leaves_it_to_world_info(campaign):
    imported(campaign, "st_westhaven.json")
    scene = "You push through the crowd toward the lamplighters gathered by the quay."
    guild = lore(campaign, scene)["The Lantern Guild"]
    assert guild.activated and guild.how == "key" and "lamplighters" in guild.reason
    assert titles(ask(campaign, scene)) == []


def test_a_regex_key_is_matched_as_a_regex_against_the_scene(campaign):
    imported(campaign, "st_westhaven.json")
    # Its 80 % roll may fail; the key is found either way.
    assert lore(campaign, "Something huge moves under the barge. A SEA SERPENT, the boy cries.")["Sea serpents"].how in {
        "key", "probability"}
    assert lore(campaign, "The sea is calm and grey this morning.")["Sea serpents"].how == "no_key"


def test_an_entry_keyed_on_the_protagonist_fires_as_in_sillytavern_at_its_depth(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    services.source_update(
        source=source, title=source.title, classification="canon", visibility="hidden",
        always_include=False, enabled=True,
    )
    secret = lore(campaign, "Mira wakes before dawn and pulls on her boots.", persona="Mira")["Mira's secret"]
    assert secret.activated and (secret.position, secret.depth) == (AT_DEPTH, 2)


def test_secondary_keys_hold_an_entry_back_until_the_scene_names_one(campaign):
    imported(campaign, "st_westhaven.json")
    noon = lore(campaign, "You study the harbour chain in the noon sun.")["Raising the harbour chain"]
    assert not noon.activated and noon.how == "secondary"
    assert "Raising the harbour chain" in fired(campaign, "At midnight you watch the harbour chain rise.")


def test_constant_entries_are_world_infos_whatever_the_sources_class(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    assert lore(campaign, "You count your coins.")["The salt wind"].how == "constant"
    assert not any(c.always_include for c in ask(campaign, "You count your coins.").candidates)
    services.source_update(
        source=source, title=source.title, classification="reference", visibility="visible",
        always_include=False, enabled=True,
    )
    assert "The salt wind" in fired(campaign, "You count your coins.")


def test_a_disabled_entry_is_not_activated(campaign):
    imported(campaign, "st_westhaven.json")
    assert "The Old Lighthouse (draft)" not in fired(campaign, "You climb the Old Lighthouse stairs.")


def test_kobold_keys_match_as_lowercase_substrings(campaign):
    from knowledge.lorebooks import read

    book = read((DATA / "kobold_story_save.json").read_bytes(), name="kobold_story_save.json")
    entry = next(e for e in book.entries if e.keys and e.enabled)
    imported(campaign, "kobold_story_save.json")
    key = entry.keys[0]
    scene = f"Half-heard, the word {key.upper()}S echoes across the hall."
    assert entry.title in fired(campaign, scene, persona="")


def test_editing_an_entry_changes_what_activates_it(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    entry = source.entries.get(title="The Lantern Guild")
    services.entry_update(entry=entry, title="The Wick Guild", keys="wickmakers, /oil ?merchants?/i", text="The Wick Guild sells oil.", enabled=True)
    source = services.source_index_now(KnowledgeSource.objects.get(pk=source.pk))
    entry.refresh_from_db()
    assert entry.keys == ["wickmakers"] and entry.regex_keys == ["/oil ?merchants?/i"]
    assert "The Wick Guild" in fired(campaign, "Two oil merchants argue in the square.")
    assert "The Wick Guild" not in fired(campaign, "The lamplighters gather by the quay.")


def test_disabling_an_entry_in_the_library_takes_it_out(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    entry = source.entries.get(title="The Lantern Guild")
    services.entry_update(entry=entry, title=entry.title, keys=", ".join(entry.keys), text=entry.text, enabled=False)
    source = services.source_index_now(KnowledgeSource.objects.get(pk=source.pk))
    assert source.passage_count == 4
    assert "The Lantern Guild" not in fired(campaign, "The lamplighters gather by the quay.")


def test_world_info_exports_back_with_edits_and_kept_settings(campaign):
    [source], _ = imported(campaign, "st_westhaven.json")
    entry = source.entries.get(title="Sea serpents")
    services.entry_update(entry=entry, title="Serpents", keys="/sea ?serpents?/i, wyrm", text="Edited.", enabled=True)
    document = services.world_info_of(KnowledgeSource.objects.get(pk=source.pk))
    original = json.loads((DATA / "st_westhaven.json").read_text())
    exported = {e["comment"]: e for e in document["entries"].values()}
    assert exported["Serpents"]["key"] == ["wyrm", "/sea ?serpents?/i"]
    assert exported["Serpents"]["content"] == "Edited." and exported["Serpents"]["probability"] == 80
    assert exported["The salt wind"]["constant"] and exported["The Old Lighthouse (draft)"]["disable"]
    assert document["scan_depth"] == original["scan_depth"]
    assert len(document["entries"]) == len(original["entries"])


def test_an_empty_lorebook_is_accepted_with_a_note(campaign):
    result = services.sources_import(campaign=campaign, files=[("empty.json", b'{"entries": {}}')], enqueue=False)
    [source] = result.created
    assert source.format == "SillyTavern World Info" and not LoreEntry.objects.filter(source=source).exists()
    assert "no entries" in result.reports[0]
    assert services.source_index_now(source).index_state == KnowledgeSource.IndexState.READY


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("broken.json", b'{"entries": {"0": {"key": "dragon", "content": 5}}}', ["SillyTavern", "entry 0", "content"]),
        ("broken.json", b'{"entries": {"0": ', ["not valid JSON", "line 1"]),
        ("book.lorebook", b'{"lorebookVersion": 5, "entries": [{"text": "x", "keys": "dragon"}]}', ["NovelAI", "entry", "keys"]),
        ("photo.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, ["PNG"]),
        ("mystery.json", b'{"hello": "world"}', ["not a format Loremaster reads"]),
        ("notes.docx", b"PK\x03\x04", ["Markdown", "lorebooks"]),
    ],
)
def test_a_malformed_file_is_refused_naming_what_is_wrong_and_stores_nothing(campaign, name, data, words):
    result = services.sources_import(campaign=campaign, files=[(name, data)], enqueue=False)
    assert not result.created
    [message] = result.refused
    assert message.startswith(name)
    for word in words:
        assert word in message
    assert not KnowledgeSource.objects.filter(campaign=campaign).exists()
    assert not LoreEntry.objects.exists()


def test_a_text_file_that_is_json_of_no_format_is_imported_as_text(campaign):
    result = services.sources_import(campaign=campaign, files=[("notes.txt", b'{"hello": "world"}')], enqueue=False)
    [source] = result.created
    assert source.format == "" and source.classification == KnowledgeSource.Classification.REFERENCE


def test_a_lorebook_renamed_to_txt_is_still_read_as_a_lorebook(campaign):
    data = (DATA / "st_westhaven.json").read_bytes()
    [source] = services.sources_import(campaign=campaign, files=[("westhaven.txt", data)], enqueue=False).created
    assert source.format == "SillyTavern World Info"


def test_a_cards_book_arrives_with_its_macros_filled_in(campaign):
    from tests.knowledge.lorebooks.test_cards import V2, png, text_chunk

    card = json.loads(json.dumps(V2))
    card["data"]["character_book"]["entries"][0]["content"] = "{{char}} tends the glade where {{user}} woke."
    result = services.sources_import(campaign=campaign, files=[("seren.png", png(text_chunk("chara", card)))], enqueue=False)
    [source] = result.created
    first = source.entries.order_by("position").first()
    assert first.text == f"{card['data']['name']} tends the glade where you woke."
