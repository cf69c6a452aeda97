"""Which text an entry is matched against and how its keys match it:
SillyTavern's WorldInfoBuffer.get and matchKeys, its secondary logic and
its macros in keys (world-info.js is the reference)."""

import re

import pytest

from tests.factories import EntryFactory
from tests.worldinfo.story import decision, run, titles
from worldinfo.records import AND_ALL, AND_ANY, NOT_ALL, NOT_ANY, BookSettings, ScanSources

OLD_TO_NEW = ("The dragon sleeps.", "Reader: I wait.", "Narrator: The wind rises.")


def test_default_scan_depth_reads_the_two_newest_messages():
    dragon = EntryFactory(title="Dragon", keys=("dragon",))
    wind = EntryFactory(title="Wind", keys=("wind",))
    assert titles(run([dragon, wind], OLD_TO_NEW)) == ["Wind"]
    assert decision(run([dragon, wind], OLD_TO_NEW), "Dragon").how == "no_key"


def test_an_entrys_scan_depth_overrides_its_books():
    dragon = EntryFactory(title="Dragon", keys=("dragon",), scan_depth=3)
    assert titles(run([dragon], OLD_TO_NEW)) == ["Dragon"]
    assert titles(run([EntryFactory(title="Dragon", keys=("dragon",))], OLD_TO_NEW,
                      book=BookSettings(scan_depth=3))) == ["Dragon"]


def test_scan_depth_zero_scans_nothing_not_even_injected_text():
    wind = EntryFactory(title="Wind", keys=("wind",))
    result = run([wind], OLD_TO_NEW, book=BookSettings(scan_depth=0), sources=ScanSources(injected=("wind",)))
    assert titles(result) == []
    assert "scan depth 0" in decision(result, "Wind").reason


def test_names_are_scanned_as_name_colon_text_unless_the_book_leaves_them_out():
    narrator = EntryFactory(title="Narrator", keys=("narrator:",))
    assert titles(run([narrator], OLD_TO_NEW)) == ["Narrator"]
    assert titles(run([narrator], OLD_TO_NEW, book=BookSettings(include_names=False))) == []


@pytest.mark.parametrize(("whole", "text", "fires"), [
    (False, "A category of beasts.", True),
    (True, "A category of beasts.", False),
    (True, "The cat, asleep.", True),
    (True, "cat", True),
    (True, "The cat_like thing.", False),
])
def test_whole_words_need_non_word_characters_around_a_single_word_key(whole, text, fires):
    cat = EntryFactory(title="Cat", keys=("cat",), match_whole_words=whole)
    assert (titles(run([cat], (text,))) == ["Cat"]) is fires


def test_a_key_of_several_words_is_matched_as_a_substring_even_with_whole_words():
    cat = EntryFactory(title="Cat", keys=("old cat",), match_whole_words=True)
    assert titles(run([cat], ("A bold catamaran.",))) == ["Cat"]


def test_whole_words_default_comes_from_the_entrys_book():
    cat = EntryFactory(title="Cat", keys=("cat",))
    assert titles(run([cat], ("A category.",), book=BookSettings(match_whole_words=True))) == []


def test_matching_ignores_case_unless_the_entry_or_its_book_is_case_sensitive():
    mara = EntryFactory(title="Mara", keys=("Mara",))
    assert titles(run([mara], ("mara waits",))) == ["Mara"]
    sensitive = EntryFactory(title="Mara", keys=("Mara",), case_sensitive=True)
    assert titles(run([sensitive], ("mara waits",))) == []
    assert titles(run([sensitive], ("Mara waits",))) == ["Mara"]
    assert titles(run([mara], ("mara waits",), book=BookSettings(case_sensitive=True))) == []


@pytest.mark.parametrize(("logic", "text", "fires"), [
    (AND_ANY, "a red dragon", True),
    (AND_ANY, "a dragon", False),
    (NOT_ALL, "a red and blue dragon", False),
    (NOT_ALL, "a red dragon", True),
    (NOT_ANY, "a red dragon", False),
    (NOT_ANY, "a dragon", True),
    (AND_ALL, "a red dragon", False),
    (AND_ALL, "a red and blue dragon", True),
])
def test_secondary_logic_is_sillytaverns(logic, text, fires):
    dragon = EntryFactory(title="Dragon", keys=("dragon",), secondary_keys=("red", "blue"), logic=logic)
    result = run([dragon], (text,))
    assert (titles(result) == ["Dragon"]) is fires
    if not fires:
        assert decision(result, "Dragon").how == "secondary"


def test_secondary_keys_are_not_read_when_the_primary_key_is_missing():
    dragon = EntryFactory(title="Dragon", keys=("dragon",), secondary_keys=("red",), logic=NOT_ANY)
    assert decision(run([dragon], ("nothing here",)), "Dragon").how == "no_key"


def test_an_entry_that_is_not_selective_ignores_its_secondary_keys():
    dragon = EntryFactory(title="Dragon", keys=("dragon",), secondary_keys=("red",), selective=False)
    assert titles(run([dragon], ("a dragon",))) == ["Dragon"]


def test_macros_are_filled_in_keys_before_matching_and_in_content_before_insertion():
    room = EntryFactory(title="Room", keys=("{{user}}'s Room",), content="{{char}} keeps <USER>'s key.")
    older = EntryFactory(title="Older", keys=("<USER>'s desk",))
    result = run([room, older], ("Ann's room is cold, Ann's desk too.",), macros={"User": "Ann", "char": "Bob"})
    assert titles(result) == ["Room", "Older"]
    assert "Bob keeps Ann's key." in result.insertions[0].text.split("\n")


def test_an_unknown_macro_stays_as_written():
    odd = EntryFactory(title="Odd", keys=("{{weather}}",))
    assert titles(run([odd], ("{{weather}} report",), macros={"user": "Ann"})) == ["Odd"]


def fake_regex_search(key: str, text: str):
    """The caller's regex search, reduced to `re` for the test."""
    body, flags = key[1:].rsplit("/", 1)
    return re.search(body, text, re.IGNORECASE if "i" in flags else 0) is not None


def test_regex_keys_go_to_the_callers_search_against_the_unlowered_text():
    dragon = EntryFactory(title="Dragon", keys=("/Dr[a-z]+n/",))
    assert titles(run([dragon], ("The Dragon wakes.",), regex_search=fake_regex_search)) == ["Dragon"]
    assert titles(run([dragon], ("the dragon wakes.",), regex_search=fake_regex_search)) == []
    flagged = EntryFactory(title="Dragon", keys=("/DR[A-Z]+N/i",))
    assert titles(run([flagged], ("the dragon wakes.",), regex_search=fake_regex_search)) == ["Dragon"]


def test_a_regex_key_refused_or_without_a_search_is_not_matched_and_says_so():
    dragon = EntryFactory(title="Dragon", keys=("/dr.gon/",))
    refused = run([dragon], ("the dragon",), regex_search=lambda key, text: None)
    untried = run([dragon], ("the dragon",))
    for result in (refused, untried):
        assert titles(result) == []
        assert "not tried" in decision(result, "Dragon").reason


def test_a_key_with_an_unescaped_slash_inside_is_plain_text():
    either = EntryFactory(title="Either", keys=("/a/b/",))
    assert titles(run([either], ("paths like /a/b/ here",))) == ["Either"]


def test_match_flags_add_their_sources_and_injected_text_is_always_scanned():
    sources = ScanSources(persona_description="A smith from Westhaven.", scenario="A siege.",
                          injected=("Author's note: storms",))
    smith = EntryFactory(title="Smith", keys=("westhaven",), match_persona_description=True)
    blind = EntryFactory(title="Blind", keys=("westhaven",))
    siege = EntryFactory(title="Siege", keys=("siege",), match_scenario=True)
    storm = EntryFactory(title="Storm", keys=("storms",))
    assert titles(run([smith, blind, siege, storm], ("nothing",), sources=sources)) == ["Smith", "Siege", "Storm"]


def test_the_matched_key_is_named_in_the_reason():
    dragon = EntryFactory(title="Dragon", keys=("wyrm", "dragon"))
    assert decision(run([dragon], ("a dragon",)), "Dragon").reason == "key “dragon”"


def test_each_entry_takes_its_defaults_from_its_own_book():
    strict = EntryFactory(title="Strict", keys=("Mara",), book="strict")
    loose = EntryFactory(title="Loose", keys=("Mara",), book="loose")
    books = {"strict": BookSettings(case_sensitive=True, scan_depth=1), "loose": BookSettings()}
    assert titles(run([strict, loose], ("mara said", "nothing"), books=books)) == ["Loose"]


def test_a_book_prepared_for_one_turn_is_not_reused_for_changed_macros():
    room = EntryFactory(title="Room", keys=("{{user}}'s room",))
    assert titles(run([room], ("Ann's room",), macros={"user": "Ann"})) == ["Room"]
    assert titles(run([room], ("Ann's room",), macros={"user": "Bea"})) == []
