"""Character cards V1, V2 and V3, as JSON and inside PNG images.

The card shapes mirror real files: the V2 hybrid is the shape of
SillyTavern's own default card (V1 fields at the top level beside
`spec`/`data`, book entries with SillyTavern's settings in `extensions`,
`probability: null`); the PNG is written here chunk by chunk as
SillyTavern's card writer does (`chara`, then a `ccv3` V3 copy, before IEND).
"""

import base64
import copy
import json
import struct
import zlib
from pathlib import Path

import pytest

from knowledge.lorebooks.cardbook import parse_character_book
from knowledge.lorebooks.cards import parse_card_json, parse_card_png
from knowledge.lorebooks.entries import LorebookError
from knowledge.lorebooks.png import read_png_text

V1 = {
    "name": "Vell",
    "description": "A smuggler of salt with a quick knife.",
    "personality": "wry, careful, loyal to coin",
    "scenario": "The harbour chain is down tonight.",
    "first_mes": "*Vell leans on the crate.* You're late.",
    "mes_example": "<START>\n{{char}}: Coin first.",
}

PYGMALION = {
    "char_name": "Maren",
    "char_persona": "The lighthouse keeper of Saltmarch.",
    "world_scenario": "A storm is coming in off the flats.",
    "char_greeting": "The lamp gutters as you climb the last stair.",
    "example_dialogue": "Maren: Shut the door.",
}

V2 = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Seren",
        "description": "Guardian of the glade.",
        "personality": "gentle, watchful",
        "scenario": "You wake in the glade after the attack.",
        "first_mes": "*You wake with a start.*",
        "mes_example": "",
        "creator_notes": "Contest winner.",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": ["*The glade is quiet.*", ""],
        "tags": ["fantasy"],
        "creator": "someone",
        "character_version": "1.0.0",
        "extensions": {"talkativeness": "0.5", "fav": False, "world": "Glade"},
        "character_book": {
            "name": "Glade",
            "entries": [
                {
                    "id": 0,
                    "keys": ["glade", "wood", "forest"],
                    "secondary_keys": [],
                    "comment": "",
                    "content": "The glade is a sanctuary.",
                    "constant": False,
                    "selective": False,
                    "insertion_order": 100,
                    "enabled": True,
                    "position": "before_char",
                    "extensions": {
                        "position": 0,
                        "probability": None,
                        "useProbability": False,
                    },
                },
                {
                    "id": 1,
                    "keys": ["shadowfang", "/beasts?/i"],
                    "secondary_keys": ["night"],
                    "comment": "Shadowfangs",
                    "content": "Beasts of darkness.",
                    "constant": True,
                    "selective": True,
                    "insertion_order": 50,
                    "enabled": False,
                    "position": "after_char",
                    "use_regex": True,
                    "extensions": {
                        "position": 4,
                        "depth": 2,
                        "role": 2,
                        "probability": 70,
                        "useProbability": True,
                        "selectiveLogic": 1,
                        "group": "monsters",
                        "group_override": True,
                        "group_weight": 40,
                        "exclude_recursion": True,
                        "display_index": 7,
                        "sticky": 2,
                    },
                },
            ],
        },
    },
}

V3 = {
    "spec": "chara_card_v3",
    "spec_version": "3.0",
    "data": {
        "name": "Orla",
        "nickname": "the Gull",
        "description": "A harbour pilot.",
        "personality": "",
        "scenario": "",
        "first_mes": "The fog is thick on the water.",
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "group_only_greetings": ["Orla waves to you all."],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {},
        "assets": [
            {"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"},
            {
                "type": "emotion",
                "uri": "data:image/png;base64," + "A" * 4000,
                "name": "joy",
                "ext": "png",
            },
        ],
        "character_book": {
            "name": "Harbour",
            "extensions": {},
            "entries": [
                {
                    "keys": ["dragon(s)?", "Orla", "/\\bfog\\b/i"],
                    "content": "Dragons nest beyond the fog bank.",
                    "extensions": {},
                    "enabled": True,
                    "insertion_order": 10,
                    "use_regex": True,
                    "constant": False,
                    "name": "Dragons",
                },
                {
                    "keys": ["pilot"],
                    "content": "Pilots guide ships past the chain.",
                    "extensions": {},
                    "enabled": True,
                    "insertion_order": 20,
                    "use_regex": False,
                    "comment": "Pilots",
                },
            ],
        },
    },
}


def png(*chunks, signature=b"\x89PNG\r\n\x1a\n"):
    """A minimal valid PNG (a 1×1 grey pixel) with the given extra chunks
    before IEND; each chunk is (type, body) or (type, body, crc)."""

    def chunk(kind, body, crc=None):
        crc = zlib.crc32(kind + body) if crc is None else crc
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    pixels = chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    return (
        signature
        + header
        + pixels
        + b"".join(chunk(*extra) for extra in chunks)
        + chunk(b"IEND", b"")
    )


def text_chunk(keyword, card):
    encoded = base64.b64encode(json.dumps(card).encode("utf-8"))
    return (b"tEXt", keyword.encode("latin-1") + b"\0" + encoded)


def test_v1_card_is_read_from_top_level_fields_with_no_book():
    book = parse_card_json(V1, name="vell.json")
    assert book.format == "Character Card V1"
    assert book.name == "Vell"
    assert book.entries == ()
    assert book.notes == ("no character book",)
    assert book.card.description == "A smuggler of salt with a quick knife."
    assert book.card.personality == "wry, careful, loyal to coin"
    assert book.card.scenario == "The harbour chain is down tonight."
    assert book.card.first_message == "*Vell leans on the crate.* You're late."
    assert book.card.extras["mes_example"] == "<START>\n{{char}}: Coin first."


def test_pygmalion_card_maps_its_char_fields():
    book = parse_card_json(PYGMALION, name="maren.json")
    assert book.format == "Character Card V1"
    card = book.card
    assert card.name == "Maren"
    assert card.description == "The lighthouse keeper of Saltmarch."
    assert card.scenario == "A storm is coming in off the flats."
    assert card.first_message == "The lamp gutters as you climb the last stair."
    assert card.extras["mes_example"] == "Maren: Shut the door."


def test_card_without_a_name_is_named_after_the_file():
    assert parse_card_json({"description": "Nobody."}, name="nobody").name == "nobody"


def test_v2_card_fields_and_extras():
    book = parse_card_json(V2, name="seren.json")
    assert book.format == "Character Card V2"
    assert book.name == "Seren"
    card = book.card
    assert card.first_message == "*You wake with a start.*"
    assert card.alternate_greetings == ("*The glade is quiet.*",)
    assert card.extras["creator"] == "someone"
    assert card.extras["creator_notes"] == "Contest winner."
    assert card.extras["tags"] == ["fantasy"]
    assert card.extras["character_version"] == "1.0.0"
    assert card.extras["extensions"] == {
        "talkativeness": "0.5",
        "fav": False,
        "world": "Glade",
    }
    assert card.extras["spec"] == "chara_card_v2"
    assert book.extras == {"character_book": {"name": "Glade"}}
    assert book.notes == ()


def test_v2_book_entries_keep_titles_keys_flags_and_their_extension_settings():
    forest, fangs = parse_card_json(V2, name="seren.json").entries
    assert forest.title == "glade"
    assert forest.keys == ("glade", "wood", "forest")
    assert forest.enabled is True and forest.constant is False
    assert forest.extras["position"] == 0
    assert forest.extras["position_name"] == "before_char"
    assert forest.extras["probability"] == 100  # null reads as SillyTavern's default
    assert "probability" in forest.extras["defaulted"]
    assert forest.extras["useProbability"] is False
    assert forest.extras["depth"] == 4

    assert fangs.title == "Shadowfangs"
    assert fangs.keys == ("shadowfang",)
    assert fangs.regex_keys == ("/beasts?/i",)
    assert fangs.secondary_keys == ("night",)
    assert fangs.enabled is False and fangs.constant is True
    extras = fangs.extras
    assert (extras["position"], extras["position_name"], extras["depth"]) == (
        4,
        "at_depth",
        2,
    )
    assert extras["card_position"] == "after_char"
    assert (extras["role"], extras["role_name"]) == (2, "assistant")
    assert extras["probability"] == 70
    assert (extras["selectiveLogic"], extras["selectiveLogic_name"]) == (1, "NOT ALL")
    assert (extras["group"], extras["groupOverride"], extras["groupWeight"]) == (
        "monsters",
        True,
        40,
    )
    assert extras["excludeRecursion"] is True
    assert extras["displayIndex"] == 7
    assert extras["sticky"] == 2
    assert extras["order"] == 50 and extras["insertion_order"] == 50
    assert extras["extensions"]["depth"] == 2


def test_v2_use_regex_does_not_turn_plain_keys_into_patterns():
    fangs = parse_card_json(V2, name="seren.json").entries[1]
    assert fangs.keys == ("shadowfang",)
    assert "regex_from_use_regex" not in fangs.extras
    assert fangs.extras["use_regex"] is True


def test_hybrid_card_takes_data_over_its_top_level_v1_copy():
    hybrid = copy.deepcopy(V2)
    hybrid.update(
        {
            "name": "Old Seren",
            "description": "A stale description.",
            "first_mes": "Stale greeting.",
            "chat": "Seren - 2023-5-12 @21h 32m",
            "create_date": "2023-5-12 @21h 32m",
            "talkativeness": "0.5",
            "creatorcomment": "Contest winner.",
        }
    )
    del hybrid["data"]["scenario"]
    hybrid["scenario"] = "Only at the top level."
    book = parse_card_json(hybrid, name="seren.json")
    assert book.format == "Character Card V2"
    assert book.name == "Seren"
    assert book.card.description == "Guardian of the glade."
    assert book.card.first_message == "*You wake with a start.*"
    assert book.card.scenario == "Only at the top level."
    assert book.card.extras["top_level"]["create_date"] == "2023-5-12 @21h 32m"
    assert "description" not in book.card.extras["top_level"]
    assert len(book.entries) == 2


def test_v3_card_keeps_its_new_fields_and_drops_asset_payloads():
    book = parse_card_json(V3, name="orla.json")
    assert book.format == "Character Card V3"
    card = book.card
    assert card.extras["nickname"] == "the Gull"
    assert card.extras["group_only_greetings"] == ["Orla waves to you all."]
    assert card.extras["assets"] == [
        {"type": "icon", "name": "main", "ext": "png", "uri": "ccdefault:"},
        {"type": "emotion", "name": "joy", "ext": "png", "uri_omitted": True},
    ]
    assert book.extras["character_book"] == {"name": "Harbour", "extensions": {}}


def test_v3_use_regex_makes_keys_in_regex_syntax_patterns_and_leaves_words_plain():
    dragons, pilots = parse_card_json(V3, name="orla.json").entries
    assert dragons.title == "Dragons"
    assert dragons.keys == ("Orla",)
    assert dragons.regex_keys == ("/\\bfog\\b/i", "/dragon(s)?/")
    assert dragons.extras["regex_from_use_regex"] == ["/dragon(s)?/"]
    assert pilots.title == "Pilots"
    assert pilots.keys == ("pilot",)
    assert pilots.regex_keys == ()


def test_book_entry_without_id_is_numbered_by_its_place():
    dragons, pilots = parse_card_json(V3, name="orla.json").entries
    assert (dragons.extras["uid"], pilots.extras["uid"]) == (0, 1)


def test_empty_character_book_is_noted():
    card = copy.deepcopy(V2)
    card["data"]["character_book"]["entries"] = []
    book = parse_card_json(card, name="seren.json")
    assert book.entries == ()
    assert book.notes == ("empty lorebook",)


@pytest.mark.parametrize(
    ("change", "entry", "field"),
    [
        (lambda entries: entries[1].update(content=3), 1, "content"),
        (lambda entries: entries[1].update(keys={"a": 1}), 1, "keys"),
        (lambda entries: entries[0].update(secondary_keys=5), 0, "secondary_keys"),
        (lambda entries: entries[1].update(enabled="sometimes"), 1, "enabled"),
        (lambda entries: entries[0].update(extensions=[1]), 0, "extensions"),
    ],
)
def test_malformed_book_entry_is_refused_naming_format_entry_and_field(
    change, entry, field
):
    card = copy.deepcopy(V2)
    change(card["data"]["character_book"]["entries"])
    with pytest.raises(LorebookError) as caught:
        parse_card_json(card, name="seren.json")
    assert str(caught.value).startswith(
        f"Character Card V2, entry {entry}, field “{field}”: "
    )
    assert caught.value.field == field


def test_book_entry_that_is_not_an_object_is_refused():
    card = copy.deepcopy(V2)
    card["data"]["character_book"]["entries"].append("loose text")
    with pytest.raises(LorebookError) as caught:
        parse_card_json(card, name="seren.json")
    assert (
        str(caught.value)
        == "Character Card V2, entry 2: the entry is a string, not an object"
    )


@pytest.mark.parametrize(
    ("card", "words"),
    [
        ({"spec": "chara_card_v2", "data": {"name": 7}}, "field “name”"),
        (
            {
                "spec": "chara_card_v2",
                "data": {"name": "x", "alternate_greetings": [1]},
            },
            "alternate greetings",
        ),
        (
            {"spec": "chara_card_v2", "data": {"name": "x", "character_book": []}},
            "character book is a list",
        ),
        ({"spec": "chara_card_v2"}, "no “data” object"),
        ({"spec": "chara_card_v9", "name": "x"}, "unknown card spec"),
    ],
)
def test_malformed_card_is_refused(card, words):
    with pytest.raises(LorebookError) as caught:
        parse_card_json(card, name="x")
    assert words in str(caught.value)


def test_png_with_a_chara_chunk_is_read():
    book = parse_card_png(png(text_chunk("chara", V2)), name="seren.png")
    assert book.format == "Character Card V2"
    assert book.name == "Seren"
    assert len(book.entries) == 2


def test_png_chunk_keyword_is_matched_case_insensitively():
    book = parse_card_png(png(text_chunk("Chara", V2)), name="seren.png")
    assert book.name == "Seren"


def test_png_prefers_the_ccv3_chunk_over_chara():
    book = parse_card_png(
        png(text_chunk("chara", V2), text_chunk("ccv3", V3)), name="card.png"
    )
    assert book.format == "Character Card V3"
    assert book.name == "Orla"


def test_png_version_comes_from_the_spec_not_the_chunk_name():
    book = parse_card_png(png(text_chunk("chara", V3)), name="orla.png")
    assert book.format == "Character Card V3"


def test_png_card_in_compressed_text_chunks_is_read():
    encoded = base64.b64encode(json.dumps(V2).encode("utf-8"))
    ztxt = (b"zTXt", b"chara\0\0" + zlib.compress(encoded))
    assert parse_card_png(png(ztxt), name="seren.png").name == "Seren"
    itxt = (
        b"iTXt",
        b"ccv3\0\1\0\0\0"
        + zlib.compress(base64.b64encode(json.dumps(V3).encode("utf-8"))),
    )
    assert parse_card_png(png(itxt), name="orla.png").name == "Orla"


def test_png_other_text_chunks_are_skipped_and_not_taken_for_the_card():
    comment = (b"tEXt", b"Software\0paint")
    assert [keyword for keyword, _ in read_png_text(png(comment, text_chunk("chara", V1)))] == ["chara"]
    assert read_png_text(png(comment), keywords=frozenset({"software"})) == [("Software", "paint")]
    assert (
        parse_card_png(png(comment, text_chunk("chara", V1)), name="vell.png").name
        == "Vell"
    )


def test_png_falls_back_to_chara_when_ccv3_will_not_decode():
    broken = (b"tEXt", b"ccv3\0%%% not base64 %%%")
    book = parse_card_png(png(text_chunk("chara", V2), broken), name="seren.png")
    assert book.name == "Seren"
    assert any("ccv3" in note for note in book.notes)


def test_png_with_bad_base64_is_refused_naming_the_chunk():
    with pytest.raises(LorebookError) as caught:
        parse_card_png(png((b"tEXt", b"chara\0%%% not base64 %%%")), name="x.png")
    assert (
        str(caught.value)
        == "Character Card PNG, field “chara”: the “chara” chunk is not base64-encoded"
    )


def test_png_with_base64_that_is_not_json_is_refused():
    with pytest.raises(LorebookError) as caught:
        parse_card_png(
            png((b"tEXt", b"chara\0" + base64.b64encode(b"hello"))), name="x.png"
        )
    assert "does not hold JSON" in str(caught.value)


def test_png_with_a_bad_crc_on_the_card_chunk_is_refused_naming_the_chunk():
    kind, body = text_chunk("chara", V2)
    with pytest.raises(LorebookError) as caught:
        parse_card_png(png((kind, body, 12345)), name="x.png")
    assert "tEXt chunk “chara” is damaged" in str(caught.value)


def test_png_without_a_card_chunk_is_refused():
    with pytest.raises(LorebookError) as caught:
        parse_card_png(png((b"tEXt", b"Software\0paint")), name="x.png")
    assert str(caught.value).startswith(
        "Character Card PNG: the image holds no character card"
    )


@pytest.mark.parametrize(
    "data",
    [
        b"GIF89a not a png",
        png(text_chunk("chara", V1), signature=b"\x89PNX\r\n\x1a\n"),
        png(text_chunk("chara", V1))[:60],
    ],
)
def test_not_a_png_or_a_cut_short_one_is_refused(data):
    with pytest.raises(LorebookError) as caught:
        parse_card_png(data, name="x.png")
    assert str(caught.value).startswith("Character Card PNG: ")


# Real files (audit): SillyTavern's default card, books saved on their own,
# card books written by hand or by other editors.

DATA = Path(__file__).parent / "data"


def seraphina():
    """SillyTavern's default_Seraphina.png card, as its `chara` chunk holds
    it (a V2 hybrid with the V1 fields on top), texts shortened."""
    return json.loads((DATA / "st_default_seraphina_card.json").read_text(encoding="utf-8"))


def test_sillytaverns_default_card_png_arrives_with_its_four_book_entries():
    book = parse_card_png(png(text_chunk("chara", seraphina())), name="default_Seraphina.png")

    assert book.format == "Character Card V2" and book.card.name == "Seraphina"
    assert [entry.title for entry in book.entries] == ["eldoria", "shadowfang", "glade", "power"]
    assert book.entries[2].keys == ("glade", "safe haven", "refuge")
    assert all(entry.enabled and not entry.constant for entry in book.entries)
    assert book.extras["character_book"]["name"] == "Eldoria"
    assert book.card.extras["extensions"]["world"] == "Eldoria"


def test_png_with_a_v2_chara_and_its_v3_ccv3_copy_reads_the_v3_card():
    v3 = copy.deepcopy(seraphina()["data"])
    v3["group_only_greetings"] = []
    v3_card = {"spec": "chara_card_v3", "spec_version": "3.0", "data": v3}

    book = parse_card_png(png(text_chunk("chara", seraphina()), text_chunk("ccv3", v3_card)), name="x.png")

    assert book.format == "Character Card V3" and len(book.entries) == 4


def test_book_entry_keys_written_as_a_comma_string_are_split():
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Mira", "first_mes": "Hello.",
        "extensions": {"depth_prompt": {"prompt": "Mira is wary.", "depth": 4, "role": "system"}},
        "character_book": {"entries": [
            {"id": 7, "keys": "Mira, cartographer", "secondary_keys": "map, secret", "content": "t",
             "insertion_order": 1},
        ]},
    }}

    book = parse_card_json(card, name="x")

    (entry,) = book.entries
    assert entry.keys == ("Mira", "cartographer") and entry.secondary_keys == ("map", "secret")
    assert entry.enabled and entry.extras["id"] == 7
    assert book.card.extras["extensions"]["depth_prompt"]["depth"] == 4


def test_book_entry_written_with_sillytaverns_disable_stays_disabled():
    card = {"spec": "chara_card_v2", "data": {"name": "Mira", "character_book": {"entries": [
        {"keys": ["a"], "content": "t", "disable": True},
        {"keys": ["b"], "content": "t"},
    ]}}}

    first, second = parse_card_json(card, name="x").entries

    assert first.enabled is False and second.enabled is True


def test_a_character_book_saved_on_its_own_reads_as_a_book():
    book = parse_character_book(json.loads((DATA / "chub_lorebook_saltroad.json").read_text()), name="x.json")

    assert book.format == "Character book (V2 lorebook)" and book.name == "Salt Road Lore" and book.card is None
    mira, karth, law = book.entries
    assert [mira.title, karth.title, law.title] == ["Mira Vell", "Karth", "Road law"]
    assert karth.keys == ("Karth", "white city") and not karth.enabled
    assert law.constant and law.enabled and law.keys == ()
    assert book.extras["extensions"]["chub"]["id"] == 123456 and book.extras["scan_depth"] == 2


def test_a_character_book_whose_entries_are_not_a_list_is_refused_naming_the_field():
    with pytest.raises(LorebookError) as caught:
        parse_character_book({"name": "x", "entries": "Mira"}, name="x")

    assert caught.value.format_name == "Character book (V2 lorebook)" and caught.value.field == "entries"
