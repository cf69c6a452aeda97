"""The World Info budget (taken sticky first, then by order; constants
count; ignore_budget), the character filter, generation triggers,
disabled entries and activation by meaning."""

import pytest

from tests.factories import EntryFactory
from tests.worldinfo.story import decision, run, titles
from worldinfo.records import CONTINUE, BookSettings, CharacterFilter, TimedEffect, TimedState

TEN_WORDS = "one two three four five six seven eight nine ten"


def tenner(title: str, **fields):
    return EntryFactory(title=title, keys=fields.pop("keys", ("sky",)), content=TEN_WORDS, **fields)


@pytest.mark.parametrize(("percent", "window", "cap", "budget"), [
    (25, 100, 0, 25), (25, 10, 0, 3), (0, 100, 0, 1), (25, 8192, 500, 500), (25, 100, 500, 25),
])
def test_the_budget_is_a_rounded_share_of_the_window_at_least_one_under_the_cap(percent, window, cap, budget):
    book = BookSettings(budget_percent=percent, budget_cap=cap)
    assert run([], ("sky",), book=book, budget_tokens=window).budget == budget


def test_entries_are_taken_by_order_until_one_would_reach_the_budget():
    entries = [tenner("Low", order=100), tenner("High", order=300), tenner("Middle", order=200)]
    result = run(entries, ("sky",), budget_tokens=100)
    assert titles(result) == ["High", "Middle"]
    assert result.used == 20
    low = decision(result, "Low")
    assert (low.how, low.reason) == ("budget", "over the World Info budget (25 tokens)")


def test_reaching_the_budget_exactly_is_over_it():
    entries = [tenner("First", order=200), EntryFactory(title="Fifteen", keys=("sky",), content="w " * 15)]
    assert titles(run(entries, ("sky",), budget_tokens=100)) == ["First"]


def test_constant_entries_count_against_the_budget():
    entries = [tenner("Always", constant=True, keys=(), order=300), tenner("Keyed", order=200),
               tenner("Last", order=100)]
    result = run(entries, ("sky",), budget_tokens=100)
    assert titles(result) == ["Always", "Keyed"]


def test_sticky_entries_are_taken_first_whatever_their_order():
    sticky = tenner("Sticky", key="sticky", order=1, sticky=5)
    state = TimedState(sticky={"sticky": TimedEffect(fingerprint=sticky.fingerprint, start=1, end=9)})
    entries = [tenner("High", order=300), tenner("Middle", order=200), sticky]
    assert titles(run(entries, ("sky",), budget_tokens=100, timed=state, chat_length=3)) == ["Sticky", "High"]


def test_an_entry_ignoring_the_budget_is_taken_after_it_overflowed():
    entries = [tenner("A", order=300), tenner("B", order=200), tenner("C", order=150),
               tenner("Free", order=100, ignore_budget=True)]
    result = run(entries, ("sky",), budget_tokens=100)
    assert titles(result) == ["A", "B", "Free"]
    assert result.used == 30


def test_an_overflow_ends_recursion():
    first = EntryFactory(title="First", keys=("sky",), content=TEN_WORDS + " fog", order=300)
    big = EntryFactory(title="Big", keys=("sky",), content="w " * 20, order=200)
    fog = EntryFactory(title="Fog", keys=("fog",))
    result = run([first, big, fog], ("sky",), budget_tokens=100, book=BookSettings(recursive=True))
    assert titles(result) == ["First"]
    assert result.passes == 1


@pytest.mark.parametrize(("names", "exclude", "fires"), [
    (("Mara",), False, True), (("Bob",), False, False), (("Mara",), True, False), (("Bob",), True, True),
])
def test_the_character_filter_limits_or_excludes_names(names, exclude, fires):
    entry = EntryFactory(title="Filtered", keys=("sky",), character_filter=CharacterFilter(names, exclude))
    result = run([entry], ("sky",), names=("Mara", "The Narrator"))
    assert (titles(result) == ["Filtered"]) is fires
    if not fires:
        assert decision(result, "Filtered").how == "filter"


def test_triggers_limit_an_entry_to_generation_types():
    entry = EntryFactory(title="On continue", keys=("sky",), triggers=(CONTINUE,))
    assert decision(run([entry], ("sky",)), "On continue").how == "trigger"
    assert titles(run([entry], ("sky",), generation=CONTINUE)) == ["On continue"]


def test_a_disabled_entry_gets_one_decision_and_nothing_else():
    entry = EntryFactory(title="Off", keys=("sky",), enabled=False, constant=True)
    result = run([entry], ("sky",))
    assert [(d.entry, d.how) for d in result.decisions] == [("Off", "disabled")]


def test_a_vectorized_entry_admitted_by_meaning_activates_when_no_key_did():
    meant = EntryFactory(title="Meant", key="meant", keys=("absent",), vectorized=True)
    plain = EntryFactory(title="Plain", key="plain", keys=("absent",))
    result = run([meant, plain], ("sky",), by_meaning=frozenset({"meant", "plain"}))
    assert titles(result) == ["Meant"]
    assert decision(result, "Meant").how == "meaning"
    keyed = EntryFactory(title="Keyed", key="keyed", keys=("sky",), vectorized=True)
    assert decision(run([keyed], ("sky",), by_meaning=frozenset({"keyed"})), "Keyed").how == "key"


def test_a_book_set_to_vectorize_all_lets_meaning_activate_its_entries_under_every_other_rule():
    meant = EntryFactory(title="Meant", key="meant", keys=(), probability=0)
    book = BookSettings(vectorize_all=True)
    result = run([meant], ("sky",), book=book, by_meaning=frozenset({"meant"}))
    assert decision(result, "Meant").how == "probability"
    sure = EntryFactory(title="Sure", key="sure", keys=())
    assert titles(run([sure], ("sky",), book=book, by_meaning=frozenset({"sure"}))) == ["Sure"]
