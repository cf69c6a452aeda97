"""Where activated entries go and in what order (SillyTavern sorts them by
order, highest first, and puts each at the front of its position's list),
and the order of the decisions."""

from tests.factories import EntryFactory
from tests.worldinfo.story import run
from worldinfo.records import AFTER, AN_BOTTOM, AN_TOP, ASSISTANT, AT_DEPTH, BEFORE, EM_TOP, SYSTEM, USER


def placed(title: str, **fields):
    fields.setdefault("keys", ("sky",))
    return EntryFactory(title=title, key=title.lower(), content=f"{title}.", **fields)


def test_within_a_position_text_runs_from_lowest_order_to_highest():
    entries = [placed("Middle", order=200), placed("Low", order=10), placed("High", order=300)]
    (insertion,) = run(entries, ("sky",)).insertions
    assert (insertion.position, insertion.text) == (BEFORE, "Low.\nMiddle.\nHigh.")
    assert insertion.entries == ("low", "middle", "high")


def test_equal_orders_put_the_later_activated_entry_first():
    entries = [placed("First", order=100), placed("Second", order=100)]
    assert run(entries, ("sky",)).insertions[0].text == "Second.\nFirst."


def test_each_position_is_its_own_insertion():
    entries = [placed("Before"), placed("After", position=AFTER), placed("Top", position=AN_TOP),
               placed("Bottom", position=AN_BOTTOM), placed("Examples", position=EM_TOP)]
    insertions = run(entries, ("sky",)).insertions
    assert [(i.position, i.text) for i in insertions] == [
        (BEFORE, "Before."), (AFTER, "After."), (AN_TOP, "Top."), (AN_BOTTOM, "Bottom."), (EM_TOP, "Examples.")]


def test_entries_at_the_same_depth_and_role_are_merged():
    entries = [placed("A", position=AT_DEPTH, depth=2, order=300), placed("B", position=AT_DEPTH, depth=2, order=100),
               placed("C", position=AT_DEPTH, depth=2, role=USER), placed("D", position=AT_DEPTH, depth=0,
                                                                          role=ASSISTANT)]
    depths = [(i.depth, i.role, i.text) for i in run(entries, ("sky",)).insertions if i.position == AT_DEPTH]
    assert sorted(depths) == [(0, ASSISTANT, "D."), (2, SYSTEM, "B.\nA."), (2, USER, "C.")]


def test_an_entry_with_empty_content_activates_but_adds_no_text():
    result = run([EntryFactory(title="Empty", keys=("sky",), content="")], ("sky",))
    assert [d.entry for d in result.activated] == ["Empty"]
    assert result.insertions == ()


def test_decisions_list_activated_entries_in_the_order_taken_then_the_rest_as_given():
    entries = [placed("Skipped", keys=("none",)), placed("Low", order=10), placed("Quiet", keys=("rain",)),
               placed("High", order=300)]
    result = run(entries, ("sky",))
    assert [(d.entry, d.activated) for d in result.decisions] == [
        ("High", True), ("Low", True), ("Skipped", False), ("Quiet", False)]


def test_a_decision_carries_the_entrys_place_order_and_tokens():
    entry = placed("Deep", position=AT_DEPTH, depth=3, role=USER, order=42)
    (d,) = run([entry], ("sky",)).decisions
    assert (d.position, d.depth, d.role, d.order, d.tokens, d.book) == (AT_DEPTH, 3, USER, 42, 1, "book")


def test_macro_filled_content_is_counted_again():
    entry = EntryFactory(title="Long", keys=("sky",), content="{{user}}")
    (d,) = run([entry], ("sky",), macros={"user": "Ann Marie Smith"}).decisions
    assert d.tokens == 3
