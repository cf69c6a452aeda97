"""World Info's insertions in the prompt (contextbuild.placement): each
position in its place, at-depth entries as their own messages that change
only the last N messages, framed as imported text, counted in the budget,
and rendered for a completions endpoint too. Results are built by hand: the
engine's own decisions are worldinfo's tests."""

import pytest

from contextbuild import build_context
from contextbuild.placement import BUDGET_RULE, FRAMING, insert_at_depth, place
from contextbuild.records import ModelSettings
from contextbuild.rules import HIDDEN_MARKER
from tests.contextbuild.samples import campaign, story, turn
from worldinfo.records import (
    AFTER,
    AN_BOTTOM,
    AN_TOP,
    AT_DEPTH,
    BEFORE,
    EM_TOP,
    SYSTEM,
    USER,
    Decision,
    Insertion,
    Result,
    TimedState,
)


def result(*insertions: Insertion, decisions=()) -> Result:
    return Result(insertions=insertions, decisions=tuple(decisions), budget=2048, used=30, timed=TimedState())


def built(*insertions: Insertion, **overrides):
    return build_context(turn(world_info=result(*insertions), **overrides))


def contents(context) -> list[str]:
    return [m["content"] for m in context.messages]


def test_before_and_after_sit_around_the_narrators_rules_and_the_campaigns_definitions():
    context = built(Insertion(BEFORE, "The Guild lights the quay.", entries=("1:1",)),
                    Insertion(AFTER, "Oren Vell is harbour master.", entries=("1:2",)),
                    Insertion(EM_TOP, "Gulls mean weather.", entries=("1:3",)))
    system = context.system_text
    assert system.startswith(FRAMING) and system.index("The Guild lights") < system.index("narrator of")
    assert system.index("Plot essentials:") < system.index("Oren Vell") < system.index("Gulls mean weather.")
    labels = [s["label"] for s in context.report["sections"] if s["block"] == "system"]
    assert labels[0] == "world_info_before" and labels.index("world_info_after") == labels.index("plot_essentials") + 1


def test_the_authors_note_positions_frame_the_note_even_when_it_is_empty():
    for note in ("Keep it grim.", ""):
        context = built(Insertion(AN_TOP, "Top lore.", entries=("1:1",)),
                        Insertion(AN_BOTTOM, "Bottom lore.", entries=("1:2",)),
                        campaign=campaign(authors_note=note))
        last = context.messages[-1]["content"]
        assert last.index("Top lore.") < last.index("Bottom lore.") < last.index("Story summary:")
        if note:
            assert last.index("Top lore.") < last.index(note) < last.index("Bottom lore.")


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_an_entry_at_depth_n_is_its_own_message_and_changes_only_the_last_n(depth):
    plain = contents(built())
    context = built(Insertion(AT_DEPTH, "The tide is turning.", depth=depth, role=SYSTEM, entries=("1:1",)))
    messages = context.messages
    at = len(messages) - depth - 1
    assert messages[at]["role"] == "system" and "The tide is turning." in messages[at]["content"]
    assert contents(context)[:at] == plain[:at] and contents(context)[at + 1:] == plain[at:]


def test_entries_of_one_depth_and_role_are_one_message_deeper_ones_first():
    placed = place(result(Insertion(AT_DEPTH, "A.", depth=1, role=USER, entries=("1:1",)),
                          Insertion(AT_DEPTH, "B.", depth=1, role=USER, entries=("1:2",)),
                          Insertion(AT_DEPTH, "C.", depth=2, role=SYSTEM, entries=("1:3",))))
    story_messages = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
                      {"role": "user", "content": "three"}]
    laid = insert_at_depth(story_messages, placed)
    assert [m["role"] for m in laid] == ["user", "system", "assistant", "user", "user"]
    assert "A.\nB." in laid[3]["content"] and "C." in laid[1]["content"]


def test_a_depth_past_the_start_goes_first():
    placed = place(result(Insertion(AT_DEPTH, "Old lore.", depth=50, role=SYSTEM, entries=("1:1",))))
    laid = insert_at_depth([{"role": "user", "content": "only"}], placed)
    assert laid[0]["role"] == "system" and laid[1]["content"] == "only"


def test_a_hidden_books_entries_are_marked_narrator_only():
    placed = place(result(Insertion(BEFORE, "Secret.", entries=("7:1",)),
                          Insertion(AFTER, "Open.", entries=("8:1",))), hidden=frozenset({"7"}))
    assert HIDDEN_MARKER in placed.before.text and HIDDEN_MARKER not in placed.after.text


def test_insertions_count_against_the_budget_and_history_makes_room():
    long = " ".join(["lore"] * 1500)
    settings = ModelSettings(model="m", context_token_budget=8192, max_output_tokens=200)
    without = build_context(turn(history=story(80, words=20), settings=settings))
    with_lore = build_context(turn(history=story(80, words=20), settings=settings,
                                   world_info=result(Insertion(AT_DEPTH, long, depth=2, entries=("1:1",)))))
    assert with_lore.report["history"]["included"] < without.report["history"]["included"]
    tokens = with_lore.report["tokens"]
    assert tokens["total"] + tokens["output_reserve"] <= tokens["budget"]


def test_completions_mode_renders_the_insertions_too():
    settings = ModelSettings(model="m", api_mode="completions")
    context = built(Insertion(AT_DEPTH, "Depth lore.", depth=1, entries=("1:1",)),
                    Insertion(BEFORE, "Before lore.", entries=("1:2",)), settings=settings)
    text = context.prompt_text
    assert "Depth lore." in text and text.index("Before lore.") < text.index("Depth lore.")
    # Depth 1: before the last message, the reader's turn, which the prompt still ends on.
    assert text.index("Depth lore.") < text.rindex("Reader: ") and text.endswith("Narrator:")


def test_the_report_carries_every_decision_with_its_source_title_and_position_word():
    decisions = (
        Decision(entry="Storm", key="3:9", book="3", activated=True, how="key", reason="key “storm”",
                 position=AT_DEPTH, depth=1, role=SYSTEM, order=100, tokens=7, until=5),
        Decision(entry="Omen", key="3:10", book="3", activated=False, how="probability",
                 reason="failed its 1 % roll (rolled 40)", position=BEFORE, depth=4, role=SYSTEM, order=100,
                 tokens=6),
    )
    report = build_context(turn(world_info=result(decisions=decisions), world_info_titles={"3": "Harbour"})).report
    [storm], [omen] = report["world_info"]["activated"], report["world_info"]["skipped"]
    assert storm | {"source": "Harbour", "position": "at_depth", "until": 5, "role": "system"} == storm
    assert omen["position"] == "before" and "until" not in omen
    assert report["world_info"]["budget"] == 2048 and report["world_info"]["rule"] == BUDGET_RULE
