"""Lorebook keys against the scene (knowledge.keys): whole words on stems,
substrings where a format says so, regexes with a time limit, standing
entities' and common words' keys never admitting, SillyTavern's secondary
key logic."""

import pytest

from knowledge import keys
from knowledge.keys import AND_ALL, AND_ANY, NOT_ALL, NOT_ANY, EntryKeys


def named(text, standing=frozenset(), **entry):
    result = keys.match([EntryKeys(entry_id=1, **entry)], text, standing)
    return result.get(1)


@pytest.mark.parametrize(
    ("key", "text", "admits"),
    [
        ("dragon", "Two dragons circle the tower.", True),
        ("dragon", "The dragon's shadow falls.", True),
        ("dragon", "A dragonfly lands on the reed.", False),
        ("Silver Tower", "You climb the silver towers at dusk.", True),
        ("Silver Tower", "The tower is silver.", False),
        ("harbour master", "The HARBOUR MASTER frowns.", True),
    ],
)
def test_plain_keys_match_whole_words_on_their_stems(key, text, admits):
    found = named(text, keys=(key,))
    assert bool(found and found.admitted) is admits


def test_substring_keys_match_inside_words_as_kobold_does():
    assert named("A dragonfly lands.", keys=("dragon",), substring=True).admitted
    assert named("herself", keys=("elf",), substring=True).admitted


def test_a_case_sensitive_key_needs_its_case():
    assert named("Rose walks in.", keys=("Rose",), case_sensitive=True).admitted
    assert named("a rose in the vase", keys=("Rose",), case_sensitive=True) is None


@pytest.mark.parametrize(
    ("pattern", "text", "admits"),
    [
        ("/sea ?serpents?/i", "A SEA SERPENT rises.", True),
        ("/sea ?serpents?/", "A SEA SERPENT rises.", False),
        ("/^Chapter/m", "Night falls.\nChapter two begins.", True),
        ("/(unclosed/", "(unclosed", False),
    ],
)
def test_regex_keys_are_matched_as_regexes_against_the_scene(pattern, text, admits):
    found = named(text, regex_keys=(pattern,))
    assert bool(found and found.admitted) is admits


def test_a_backtracking_pattern_gives_up_instead_of_hanging_the_turn():
    found = named("a" * 5000 + "!", regex_keys=("/(a|aa)+$/",))
    assert found is None


def test_a_library_of_backtracking_patterns_costs_a_turn_at_most_its_regex_budget():
    import time

    hostile = [EntryKeys(entry_id=i, regex_keys=(f"/(a|aa)+{i}$/",)) for i in range(40)]
    started = time.monotonic()
    assert keys.match(hostile, "a" * 5000 + "!", frozenset()) == {}
    assert time.monotonic() - started < 1.0  # 40 patterns at their own limit would take 2 s


def test_a_key_made_of_a_standing_entity_never_admits_and_says_why():
    found = named("Mira wakes.", standing=frozenset({"mira"}), keys=("Mira",))
    assert not found.admitted and "standing entities" in found.why
    assert named("Mira finds the locket.", standing=frozenset({"mira"}), keys=("Mira", "locket")).keys == ("locket",)


def test_a_key_of_common_words_only_never_admits():
    found = named("There it is.", keys=("there",))
    assert not found.admitted and "only common words" in found.why


@pytest.mark.parametrize(
    ("logic", "text", "admits"),
    [
        (AND_ANY, "The chain rises at night.", True),
        (AND_ANY, "The chain rises.", False),
        (NOT_ALL, "The chain rises at night and midnight.", False),
        (NOT_ALL, "The chain rises at night.", True),
        (NOT_ANY, "The chain rises at night.", False),
        (NOT_ANY, "The chain rises.", True),
        (AND_ALL, "The chain rises at night, at midnight.", True),
        (AND_ALL, "The chain rises at night.", False),
    ],
)
def test_secondary_keys_follow_sillytaverns_logic_and_veto_the_entry(logic, text, admits):
    found = named(text, keys=("chain",), secondary_keys=("night", "midnight"), logic=logic)
    assert found.admitted is admits
    assert found.vetoed is (not admits)


def test_secondary_keys_are_ignored_when_the_entry_is_not_selective():
    assert named("The chain rises.", keys=("chain",), secondary_keys=("night",), selective=False).admitted
