"""Sticky, cooldown and delay across turns (SillyTavern's
WorldInfoTimedEffects), each turn fed the timed state the previous one
returned: a story's lineage. A turn's chat length is the number of messages
before its narration: 1, 3, 5, ... as each turn adds an action and a
narration."""

import dataclasses

from tests.factories import EntryFactory
from tests.worldinfo.story import decision, run, titles
from worldinfo.records import TimedState


def bell(**timers):
    return EntryFactory(title="Bell", key="bell", keys=("bell",), **timers)


def turn(entry, text: str, chat_length: int, state: TimedState):
    return run([entry], (text,), chat_length=chat_length, timed=state)


def play(entry, texts: list[str]):
    """Turns at chat lengths 1, 3, 5, ...; each result and the state it leaves."""
    state, results = TimedState(), []
    for n, text in enumerate(texts):
        result = turn(entry, text, 1 + 2 * n, state)
        results.append(result)
        state = result.timed
    return results


def test_sticky_keeps_an_entry_active_until_its_end():
    results = play(bell(sticky=4), ["the bell", "quiet", "quiet"])
    assert [titles(r) for r in results] == [["Bell"], ["Bell"], []]
    assert results[0].timed.sticky["bell"].end == 5
    second = decision(results[1], "Bell")
    assert (second.how, second.until) == ("sticky", 5)


def test_cooldown_holds_an_entry_back_after_it_fired():
    results = play(bell(cooldown=4), ["the bell", "the bell", "the bell"])
    assert [titles(r) for r in results] == [["Bell"], [], ["Bell"]]
    held = decision(results[1], "Bell")
    assert (held.how, held.until, held.reason) == ("cooldown", 5, "cooling down until chat length 5")
    assert results[2].timed.cooldown["bell"].start == 5


def test_a_sticky_end_starts_the_cooldown_there():
    results = play(bell(sticky=2, cooldown=4), ["the bell", "the bell", "the bell", "the bell"])
    assert [titles(r) for r in results] == [["Bell"], [], [], ["Bell"]]
    effect = results[1].timed.cooldown["bell"]
    assert (effect.start, effect.end, effect.protected) == (3, 7, True)


def test_delay_holds_an_entry_until_the_chat_is_long_enough():
    results = play(bell(delay=4), ["the bell", "the bell", "the bell"])
    assert [titles(r) for r in results] == [[], [], ["Bell"]]
    assert (decision(results[0], "Bell").how, decision(results[0], "Bell").until) == ("delay", 4)


def test_a_regeneration_at_the_same_length_drops_the_effect_it_set():
    entry = bell(sticky=4)
    first = turn(entry, "the bell", 1, TimedState())
    again = turn(entry, "quiet", 1, first.timed)
    assert titles(again) == []
    assert "bell" not in again.timed.sticky


def test_a_branch_reads_only_the_timers_of_its_own_lineage():
    entry = bell(cooldown=4)
    first = turn(entry, "the bell", 1, TimedState())
    continued = turn(entry, "the bell", 3, first.timed)
    assert titles(continued) == []
    branch = turn(entry, "the bell", 3, TimedState())
    assert titles(branch) == ["Bell"]
    sibling = turn(entry, "the bell", 3, first.timed)
    assert titles(sibling) == [] and sibling.timed == continued.timed


def test_an_undo_returns_to_the_older_state_and_its_timers():
    entry = bell(sticky=6)
    results = play(entry, ["the bell", "quiet", "quiet"])
    redone = turn(entry, "quiet", 3, results[0].timed)
    assert titles(redone) == ["Bell"]
    assert redone.timed == results[1].timed


def test_editing_an_entry_resets_its_timers():
    entry = bell(sticky=4, cooldown=6)
    first = turn(entry, "the bell", 1, TimedState())
    edited = dataclasses.replace(entry, content="A new bell.", fingerprint="bell:2")
    assert titles(turn(edited, "quiet", 3, first.timed)) == []
    after = turn(edited, "the bell", 3, first.timed)
    assert titles(after) == ["Bell"]
    assert after.timed.sticky["bell"].fingerprint == "bell:2"


def test_an_effect_of_an_entry_not_in_this_turn_is_kept_until_it_ends():
    entry = bell(sticky=4)
    first = turn(entry, "the bell", 1, TimedState())
    other = EntryFactory(title="Other", keys=("other",))
    assert "bell" in run([other], ("x",), chat_length=3, timed=first.timed).timed.sticky
    assert "bell" not in run([other], ("x",), chat_length=5, timed=first.timed).timed.sticky


def test_the_timed_state_survives_being_stored():
    results = play(bell(sticky=2, cooldown=4), ["the bell", "the bell"])
    state = results[1].timed
    assert TimedState.from_stored(state.as_stored()) == state
