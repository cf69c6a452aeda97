"""Inclusion groups (SillyTavern's filterByInclusionGroups) and the
probability roll that follows them."""

import re

from tests.factories import EntryFactory
from tests.worldinfo.story import decision, run, titles
from worldinfo.records import BookSettings, TimedEffect, TimedState


def weather(**flags):
    return [EntryFactory(title=title, keys=("sky",), groups=("weather",), **flags.get(title, {}))
            for title in ("Rain", "Sun", "Snow")]


def test_a_group_admits_one_member():
    result = run(weather(), ("the sky",))
    assert len(result.activated) == 1
    losers = [d for d in result.skipped if d.how == "group"]
    assert len(losers) == 2
    assert all(d.reason.startswith("lost group “weather” to “") for d in losers)


def test_prioritize_picks_the_highest_order_among_prioritized_members():
    entries = weather(Rain={"group_override": True, "order": 50}, Sun={"group_override": True, "order": 200},
                      Snow={"order": 300})
    result = run(entries, ("the sky",))
    assert titles(result) == ["Sun"]
    assert decision(result, "Rain").reason == "lost group “weather” to “Sun” (prioritized, order 200)"


def test_the_weighted_draw_follows_group_weight():
    heavy = EntryFactory(title="Heavy", keys=("sky",), groups=("g",), group_weight=300)
    light = EntryFactory(title="Light", keys=("sky",), groups=("g",), group_weight=100)
    wins = sum(titles(run([heavy, light], ("sky",), seed=f"s{n}")) == ["Heavy"] for n in range(400))
    assert 0.65 < wins / 400 < 0.85


def test_a_member_of_weight_zero_before_the_others_never_wins_the_draw():
    nothing = EntryFactory(title="Nothing", keys=("sky",), groups=("g",), group_weight=0, order=200)
    something = EntryFactory(title="Something", keys=("sky",), groups=("g",), group_weight=100)
    assert {tuple(titles(run([nothing, something], ("sky",), seed=f"s{n}"))) for n in range(50)} == {("Something",)}


def test_the_draw_is_the_same_for_the_same_seed_and_changes_with_it():
    entries = weather()
    first = [titles(run(entries, ("sky",), seed=f"s{n}")) for n in range(30)]
    again = [titles(run(entries, ("sky",), seed=f"s{n}")) for n in range(30)]
    assert first == again
    assert len({tuple(t) for t in first}) == 3


def test_a_sticky_member_wins_its_group():
    entries = weather(Snow={"sticky": 3, "key": "snow"})
    state = TimedState(sticky={"snow": TimedEffect(fingerprint=entries[2].fingerprint, start=2, end=8)})
    for n in range(10):
        result = run(entries, ("sky",), seed=f"s{n}", timed=state, chat_length=4)
        assert titles(result) == ["Snow"]
        assert decision(result, "Rain").reason == "lost group “weather” to “Snow” (sticky)"


def test_group_scoring_removes_members_matching_fewer_keys():
    storm = EntryFactory(title="Storm", keys=("rain", "wind"), groups=("g",), use_group_scoring=True)
    drizzle = EntryFactory(title="Drizzle", keys=("rain",), groups=("g",), use_group_scoring=True)
    result = run([storm, drizzle], ("rain and wind",))
    assert titles(result) == ["Storm"]
    assert decision(result, "Drizzle").reason == "lost group “g” to “Storm” (score 1 < 2)"


def test_group_scoring_comes_from_the_book_and_a_member_may_opt_out():
    storm = EntryFactory(title="Storm", keys=("rain", "wind"), groups=("g",), group_weight=0, order=200)
    drizzle = EntryFactory(title="Drizzle", keys=("rain",), groups=("g",), use_group_scoring=False)
    scored = run([storm, drizzle], ("rain and wind",), book=BookSettings(use_group_scoring=True))
    # Drizzle is not scored, so it stays in the draw, which weight 0 lets it win.
    assert titles(scored) == ["Drizzle"]


def test_scoring_counts_secondary_keys_under_and_any():
    both = EntryFactory(title="Both", keys=("rain",), secondary_keys=("wind",), groups=("g",), use_group_scoring=True)
    one = EntryFactory(title="One", keys=("rain", "hail"), groups=("g",), use_group_scoring=True)
    assert titles(run([both, one], ("rain and wind",))) == ["Both"]


def test_a_group_that_fired_in_an_earlier_pass_admits_no_new_member():
    first = EntryFactory(title="First", keys=("sky",), groups=("g",), content="fog rolls in", order=200)
    later = EntryFactory(title="Later", keys=("fog",), groups=("g",))
    result = run([first, later], ("sky",), book=BookSettings(recursive=True))
    assert titles(result) == ["First"]
    assert decision(result, "Later").reason == "group “g” already has “First” from an earlier pass"


def test_an_entry_in_several_groups_must_win_each():
    both = EntryFactory(title="Both", keys=("sky",), groups=("a", "b"))
    rival = EntryFactory(title="Rival", keys=("sky",), groups=("b",), group_override=True)
    alone = EntryFactory(title="Alone", keys=("sky",), groups=("a",), group_weight=0, order=300)
    result = run([both, rival, alone], ("sky",))
    assert "Both" not in titles(result)
    assert "Rival" in titles(result)


def test_probability_is_rolled_and_reproducible():
    maybe = EntryFactory(title="Maybe", keys=("sky",), probability=50)
    outcomes = [titles(run([maybe], ("sky",), seed=f"s{n}")) == ["Maybe"] for n in range(400)]
    assert 0.4 < sum(outcomes) / 400 < 0.6
    assert outcomes == [titles(run([maybe], ("sky",), seed=f"s{n}")) == ["Maybe"] for n in range(400)]


def test_a_failed_roll_names_the_chance_and_the_roll():
    maybe = EntryFactory(title="Maybe", keys=("sky",), probability=30)
    failed = next(r for r in (run([maybe], ("sky",), seed=f"s{n}") for n in range(50)) if not r.activated)
    reason = decision(failed, "Maybe").reason
    rolled = float(re.fullmatch(r"failed its 30 % roll \(rolled (\d+\.\d)\)", reason).group(1))
    assert rolled > 30


def test_probability_100_or_off_always_passes_and_0_never_does():
    sure = EntryFactory(title="Sure", keys=("sky",), probability=100)
    off = EntryFactory(title="Off", keys=("sky",), probability=0, use_probability=False)
    never = EntryFactory(title="Never", keys=("sky",), probability=0)
    for n in range(30):
        assert sorted(titles(run([sure, off, never], ("sky",), seed=f"s{n}"))) == ["Off", "Sure"]


def test_a_sticky_entry_skips_its_roll():
    never = EntryFactory(title="Never", key="never", keys=("sky",), probability=0, sticky=5)
    state = TimedState(sticky={"never": TimedEffect(fingerprint=never.fingerprint, start=2, end=8)})
    assert titles(run([never], ("nothing",), timed=state, chat_length=4)) == ["Never"]


def test_the_roll_comes_after_the_group_so_a_failed_winner_leaves_the_group_empty():
    winner = EntryFactory(title="Winner", keys=("sky",), groups=("g",), group_override=True, probability=0)
    loser = EntryFactory(title="Loser", keys=("sky",), groups=("g",))
    result = run([winner, loser], ("sky",))
    assert titles(result) == []
    assert decision(result, "Winner").how == "probability"
    assert decision(result, "Loser").how == "group"


def test_a_loser_keeps_the_reason_it_lost_by_when_a_later_pass_turns_it_away_again():
    winner = EntryFactory(title="Winner", keys=("sky",), groups=("g",), group_override=True, content="fog")
    loser = EntryFactory(title="Loser", keys=("sky",), groups=("g",))
    result = run([winner, loser], ("sky",), book=BookSettings(recursive=True))
    assert result.passes == 2
    assert decision(result, "Loser").reason == "lost group “g” to “Winner” (prioritized, order 100)"
