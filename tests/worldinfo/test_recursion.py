"""Recursion, its flags and its step limit, and min activations: the pass
loop of SillyTavern's checkWorldInfo."""

from tests.factories import EntryFactory
from tests.worldinfo.story import decision, run, titles
from worldinfo.records import BookSettings

RECURSIVE = BookSettings(recursive=True)


def chain(n: int, **flags):
    """Entry i is keyed on "link{i}" and names "link{i+1}"."""
    return [EntryFactory(title=f"Link {i}", keys=(f"link{i}",), content=f"see link{i + 1}", order=100 - i,
                         **(flags if i else {})) for i in range(n)]


def test_without_recursion_activated_contents_are_not_scanned():
    assert titles(run(chain(3), ("link0",))) == ["Link 0"]


def test_recursion_scans_activated_contents_pass_after_pass():
    result = run(chain(4), ("link0",), book=RECURSIVE)
    assert titles(result) == ["Link 0", "Link 1", "Link 2", "Link 3"]
    assert [d.recursion_level for d in result.activated] == [0, 1, 2, 3]
    assert decision(result, "Link 2").how == "recursion"
    assert result.passes == 5


def test_max_recursion_steps_counts_every_pass_including_the_first():
    result = run(chain(4), ("link0",), book=BookSettings(recursive=True, max_recursion_steps=2))
    assert titles(result) == ["Link 0", "Link 1"]
    assert result.passes == 2


def test_prevent_recursion_keeps_an_entrys_content_out_of_the_next_pass():
    entries = chain(3)
    entries[0] = EntryFactory(title="Link 0", keys=("link0",), content="see link1", prevent_recursion=True)
    assert titles(run(entries, ("link0",), book=RECURSIVE)) == ["Link 0"]


def test_exclude_recursion_entries_match_the_story_but_not_recursion_text():
    entries = chain(2, exclude_recursion=True)
    result = run(entries, ("link0",), book=RECURSIVE)
    assert titles(result) == ["Link 0"]
    assert titles(run(entries, ("link0 link1",), book=RECURSIVE)) == ["Link 0", "Link 1"]


def test_delay_until_recursion_waits_for_a_recursion_pass():
    early = EntryFactory(title="Early", keys=("storm",), content="thunder")
    late = EntryFactory(title="Late", keys=("storm",), delay_until_recursion=1)
    result = run([early, late], ("storm",), book=RECURSIVE)
    assert titles(result) == ["Early", "Late"]
    assert decision(result, "Late").recursion_level == 1


def test_when_a_pass_finds_nothing_the_next_delay_level_opens_at_once():
    """SillyTavern's availableRecursionDelayLevels: the first level is
    preset, and a pass that leaves nothing to recurse on moves to the next
    level: here level 2 opens for the second pass, so both entries fire
    in it (recursion off, nothing else to scan)."""
    one = EntryFactory(title="One", keys=("storm",), delay_until_recursion=1, order=10)
    two = EntryFactory(title="Two", keys=("storm",), delay_until_recursion=2, order=20)
    result = run([one, two], ("storm",))
    assert titles(result) == ["Two", "One"]
    assert result.passes == 2
    assert decision(result, "One").how == "recursion"


def test_a_higher_delay_level_is_held_while_a_lower_one_is_open():
    one = EntryFactory(title="One", keys=("storm",), content="rain", delay_until_recursion=1)
    two = EntryFactory(title="Two", keys=("rain",), delay_until_recursion=2)
    result = run([one, two], ("storm",), book=RECURSIVE)
    assert titles(result) == ["One", "Two"]
    assert [d.recursion_level for d in result.activated] == [1, 2]


def test_min_activations_reaches_back_one_message_per_pass():
    old = EntryFactory(title="Old", keys=("harbour",))
    story = ("The harbour.", "One.", "Two.", "Three.")
    assert titles(run([old], story)) == []
    result = run([old], story, book=BookSettings(min_activations=1))
    assert titles(result) == ["Old"]
    assert result.scanned_depth == 4
    assert decision(result, "Old").reason == "key “harbour” (min activations, scan depth 4)"


def test_min_activations_stops_at_its_depth_limit_and_at_the_start_of_the_story():
    old = EntryFactory(title="Old", keys=("harbour",))
    story = ("The harbour.", "One.", "Two.", "Three.")
    limited = run([old], story, book=BookSettings(min_activations=1, min_activations_depth_max=2))
    assert titles(limited) == []
    assert limited.scanned_depth == 3
    # SillyTavern checks the limit before it advances: a limit of 3 still scans depth 4.
    assert titles(run([old], story, book=BookSettings(min_activations=1, min_activations_depth_max=3))) == ["Old"]
    missing = run([EntryFactory(title="Never", keys=("nowhere",))], story, book=BookSettings(min_activations=1))
    assert titles(missing) == []
    assert missing.scanned_depth == 5
    assert any("min activations" in note for note in missing.notes)


def test_min_activations_is_satisfied_by_entries_already_found():
    near = EntryFactory(title="Near", keys=("three",))
    far = EntryFactory(title="Far", keys=("harbour",))
    result = run([near, far], ("The harbour.", "One.", "Two.", "Three."), book=BookSettings(min_activations=1))
    assert titles(result) == ["Near"]


def test_an_entrys_own_scan_depth_is_not_skewed_by_min_activations():
    fixed = EntryFactory(title="Fixed", keys=("harbour",), scan_depth=1)
    result = run([fixed], ("The harbour.", "One.", "Two."), book=BookSettings(min_activations=1))
    assert titles(result) == []


def test_several_books_combine_to_the_most_permissive_turn_settings():
    entries = [EntryFactory(title="Link 0", keys=("link0",), content="link1", book="a"),
               EntryFactory(title="Link 1", keys=("link1",), content="link2", book="b"),
               EntryFactory(title="Link 2", keys=("link2",), book="b")]
    books = {"a": BookSettings(recursive=True, max_recursion_steps=2), "b": BookSettings(max_recursion_steps=0)}
    assert titles(run(entries, ("link0",), books=books)) == ["Link 0", "Link 1", "Link 2"]
