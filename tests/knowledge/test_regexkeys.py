"""Regex keys judged before they are compiled, and compiled once per
campaign (knowledge.regexkeys, issue 23): a key that would unroll into
millions of copies is refused from its text, in milliseconds, and a turn
says why; a campaign's table compiles each key once and within the turn's
deadline; ordinary keys, flags included, match as before."""

import time

import pytest

from knowledge import regexkeys
from knowledge.keys import REFUSALS_REPORTED
from knowledge.regexkeys import OUT_OF_TIME, Patterns
from knowledge.worldinfo.loading import TurnRegex

#: The probe's compile bomb: compiled, about 270 MB and 0.4-6 s each.
BOMB = "/(?#{n})(?:(?:(?:a{{100}}){{100}}){{100}})/"
SCENE = "The lanterns swing over the quay; beyond the glade the forest is dark."


@pytest.mark.parametrize(
    ("pattern", "size"),
    [
        (r"\b(?:dragon|wyrm)s?\b", 13),
        ("sea ?serpents?", 12),
        (".{0,200}", 200),
        (r"\p{L}{2,20}", 23),  # \p, then the {L} a scanner cannot tell from text, then 20
        ("a{1000,}", 1001),
        ("(?:a|b){1000}", 2000),
        ("(?:(?:(?:a{100}){100}){100})", 10_000),  # counting stops past the limit
        ("a(?#a comment){1000}", 1000),  # a comment between an item and its count hides nothing
        ("(?:a{100})(?i){100}", 10_000),  # nor do inline flags
        ("[]{(]{1000}", 1000),  # a class ends at its first `]` that is not its first character
        (r"[\]{]{1000}", 1000),
        ("a{99999999999999999999}", 10**12),
    ],
)
def test_a_keys_size_is_the_copies_counted_repetition_could_unroll_into(pattern, size):
    assert regexkeys.size_of(pattern) == size


def test_the_compile_bomb_is_refused_from_its_text_without_compiling(compiles):
    started = time.perf_counter()
    pattern, why = regexkeys.compile_key(BOMB.format(n=1))
    assert time.perf_counter() - started < 0.05
    assert pattern is None and compiles == []
    assert "repeats too much" in why and "the limit is 1,000" in why


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("/" + "a" * 1001 + "/", "characters long"),
        ("/(?x)a # [\n(?:a{100}){100}\n]/", "verbose mode"),
    ],
)
def test_keys_too_long_or_in_verbose_mode_are_refused(key, words):
    assert words in regexkeys.problem(key)


def test_a_turn_with_compile_bombs_ends_well_under_a_second_and_says_why(compiles):
    search = TurnRegex(Patterns())
    started = time.perf_counter()
    answers = [search(BOMB.format(n=i), "a" * 2000) for i in range(4)]
    assert time.perf_counter() - started < 0.2
    assert compiles == [] and answers == [None] * 4
    assert len(search.refused) == 4 and all("repeats too much" in why for why in search.refused.values())


def test_a_turn_reports_only_the_first_few_refused_keys():
    search = TurnRegex(Patterns())
    for i in range(30):
        search(BOMB.format(n=i), SCENE)
    assert len(search.notes()) == REFUSALS_REPORTED


def test_a_campaigns_table_compiles_each_key_once_across_turns(compiles):
    table = Patterns(max_keys=100)
    keys = [f"/(?#{i})lanterns?/i" for i in range(50)]
    first = [TurnRegex(table)(key, SCENE) for key in keys]
    assert len(compiles) == 50 and table.compiles == 50
    second = [TurnRegex(table)(key, SCENE) for key in keys]
    assert len(compiles) == 50
    assert first == second == [True] * 50


def test_past_the_campaigns_limit_keys_are_refused_uncompiled(compiles):
    search = TurnRegex(Patterns(max_keys=3))
    answers = [search(f"/(?#{i})lanterns?/", SCENE) for i in range(5)]
    assert len(compiles) == 3 and answers == [True, True, True, None, None]
    assert all("past the 3 regex keys" in why for why in search.refused.values()) and len(search.refused) == 2


def test_past_the_campaigns_unrolled_size_keys_are_refused():
    search = TurnRegex(Patterns(max_size=1500))
    answers = [search(f"/(?#{i})x{{0,600}}lanterns/", SCENE) for i in range(3)]
    assert answers == [True, True, None]
    assert "past 1,500 unrolled copies" in search.refused["/(?#2)x{0,600}lanterns/"]


def test_once_the_turns_time_is_spent_no_key_is_tried_and_none_is_refused(compiles):
    search = TurnRegex(Patterns(), budget=0)
    assert search("/lanterns/", SCENE) is None
    assert compiles == [] and search.refused == {}


def test_the_deadline_is_checked_before_a_compile_and_an_untried_key_says_nothing(compiles):
    table = Patterns()
    assert table.get("/lanterns/", time.monotonic() - 1) == (None, OUT_OF_TIME)
    assert compiles == [] and table.compiles == 0
    # Not tried is not refused: the next turn, with time left, compiles it.
    assert table.get("/lanterns/", time.monotonic() + 1)[0] is not None


@pytest.mark.parametrize(
    ("pattern", "text", "admits"),
    [
        ("/glade|forest/i", "Beyond the GLADE the path bends.", True),
        ("/glade|forest/", "Beyond the GLADE the path bends.", False),
        ("/^the forest/im", "Night falls.\nThe forest waits.", True),
        ("/forest.path/s", "the forest\npath", True),
        ("/forest.path/", "the forest\npath", False),
        (r"/\p{Lu}{2}\d/u", "Gate AB7 is shut.", True),
        ("/(?<guild>lamp)lighters?/g", "The lamplighters gather.", True),
    ],
)
def test_ordinary_regex_keys_and_their_flags_match_as_before(pattern, text, admits):
    assert TurnRegex(Patterns())(pattern, text) is admits


def test_a_new_table_adopts_the_compiled_keys_still_wanted_within_its_limits(compiles):
    old = Patterns()
    for key in ("/quay/", "/dock/", "/pier/", "/(un/"):
        old.get(key, time.monotonic() + 1)
    new = Patterns(max_keys=1)
    new.adopt(old, ["/dock/", "/pier/", "/(un/", "/mast/"])
    assert (new.held, new.compiles) == (1, 0)
    assert new.get("/dock/", 0)[0] is old.get("/dock/", 0)[0]
    assert new.get("/pier/", time.monotonic() + 1)[0] is None  # past its one key
    assert len(compiles) == 4


def test_an_importer_never_compiles_a_bare_key_longer_than_a_regex_key_may_be():
    from knowledge.lorebooks.entries import compiles_as_pattern

    started = time.perf_counter()
    assert not compiles_as_pattern("(?:ab|cd)" * 100_000)  # 900 KB: 10 s for the standard library
    assert time.perf_counter() - started < 0.1
    assert compiles_as_pattern("(?:ab|cd)+") and not compiles_as_pattern("(unclosed")
