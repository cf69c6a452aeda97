import json

import pytest

from contextbuild import (
    DEFAULT_NARRATOR_PROMPT,
    Campaign,
    ContextOverflow,
    HistoryAction,
    ModelSettings,
    Window,
    build_context,
    count_tokens,
)
from contextbuild.rules import HIDDEN_MARKER, HIDDEN_RULE
from tests.contextbuild.samples import campaign, candidate, knowledge, story, turn

DESIGN_ORDER = [
    "narrator", "state_rule", "campaign_canon", "knowledge_rule", "always_canon",
    "ai_instructions", "persona", "plot_essentials",
    "history", "authors_note", "recent_history",
    "story_summary", "knowledge_inspiration", "knowledge_reference", "knowledge_canon",
    "used_memories", "narrative_state", "length_hint", "state_refusals", "state_reminder",
]
PLAYER = "I hail the harbourmaster and hold up the broken seal."


def library(per_class=1, words=20):
    return knowledge(
        candidate("always", words=words, always_include=True),
        *(candidate(f"c{i}", "canon", words=words, visibility="hidden") for i in range(per_class)),
        *(candidate(f"r{i}", "reference", words=words) for i in range(per_class)),
        *(candidate(f"i{i}", "inspiration", words=words) for i in range(per_class)),
    )


def full_turn(**overrides):
    overrides.setdefault("knowledge", library())
    overrides.setdefault("state_refusals", ("aldric: dead -> alive is forbidden",))
    overrides.setdefault("player_text", PLAYER)
    return turn(**overrides)


def settings(budget=8192, output=600):
    return ModelSettings(model="test-model", context_token_budget=budget, max_output_tokens=output)


def section(built, label):
    return next(s for s in built.report["sections"] if s["label"] == label)


def labels(built):
    return [s["label"] for s in built.report["sections"]]


def test_sections_follow_the_design_order():
    assert labels(build_context(full_turn())) == DESIGN_ORDER


def test_system_text_holds_the_static_block_and_story_text_the_rest():
    built = build_context(full_turn())
    sections = built.report["sections"]
    assert built.system_text == "\n\n".join(s["text"] for s in sections[:8])
    assert built.story_text == "\n\n".join(s["text"] for s in sections[8:])
    assert built.report["prompt"] == {"system": built.system_text, "story": built.story_text}


@pytest.mark.parametrize(
    ("budget", "output"),
    [(2500, 200), (3000, 600), (4096, 600), (4096, 1500), (8192, 600),
     (8192, 2400), (16000, 1000), (32000, 4000)],
)
def test_reply_reserve_is_never_spent(budget, output):
    built = build_context(full_turn(settings=settings(budget, output), history=story(600),
                                    knowledge=library(per_class=30)))
    tokens = built.report["tokens"]
    assert tokens["output_reserve"] == output + 64
    exact = count_tokens(built.system_text) + count_tokens(built.story_text)
    assert exact <= tokens["total"]
    assert tokens["total"] + tokens["output_reserve"] <= budget
    spendable = tokens["available_for_history"]
    assert tokens["protected"] + tokens["output_reserve"] + spendable == budget
    assert (tokens["knowledge_spent"] + tokens["history_spent"] + tokens["unused"]
            == tokens["available_for_history"])
    assert tokens["unused"] >= 0


def test_protected_overflow_names_the_parts_the_reserve_and_the_budget():
    big = campaign(plot_essentials="The seal is cracked. " * 400)
    with pytest.raises(ContextOverflow) as raised:
        build_context(full_turn(campaign=big, settings=settings(2000, 600)))
    message = str(raised.value)
    assert "plot_essentials" in message
    assert "664 reserved for the reply" in message
    assert "context budget is 2000" in message
    assert "Raise the context budget" in message


def test_overflow_under_a_verified_window_says_raising_the_setting_will_not_help():
    window = Window(verified=True, tokens=1200, source="props")
    with pytest.raises(ContextOverflow) as raised:
        build_context(full_turn(settings=settings(8192, 600), window=window))
    assert "found to accept" in str(raised.value)
    assert "context budget is 1200" in str(raised.value)


def test_a_reply_cap_as_large_as_the_budget_overflows():
    with pytest.raises(ContextOverflow):
        build_context(turn(campaign=Campaign(), settings=settings(4096, 4096)))


@pytest.mark.parametrize("budget", [2500, 3000, 4000, 6000])
def test_knowledge_never_pushes_out_state_reader_input_or_reserve(budget):
    built = build_context(full_turn(settings=settings(budget, 600),
                                    knowledge=library(per_class=60, words=80)))
    tokens = built.report["tokens"]
    assert "narrative_state" in labels(built)
    assert built.story_text.count(PLAYER) == 1
    assert section(built, "recent_history")["text"].endswith(PLAYER)
    assert tokens["knowledge_spent"] <= int(tokens["available_for_history"] * 0.33)
    assert tokens["total"] + tokens["output_reserve"] <= budget


def test_unspent_knowledge_budget_goes_back_to_history():
    with_library = build_context(full_turn(history=story(400)))
    without = build_context(full_turn(history=story(400), knowledge=None))
    assert (without.report["tokens"]["history_spent"]
            > with_library.report["tokens"]["history_spent"])
    assert without.report["knowledge"]["used"] == []


@pytest.mark.parametrize(
    ("actions", "player", "before"), [(10, "", 7), (10, PLAYER, 8), (2, "", 0)]
)
def test_authors_note_sits_three_actions_from_the_end(actions, player, before):
    built = build_context(turn(history=story(actions), player_text=player))
    recent = section(built, "recent_history")["text"].split("\n\n")
    assert len(recent) == min(3, actions + bool(player))
    story_labels = labels(built)[labels(built).index("plot_essentials") + 1:]
    expected = ["authors_note", "recent_history"]
    if before:
        expected.insert(0, "history")
    assert story_labels[:len(expected)] == expected
    if before:
        last_before_note = section(built, "history")["text"].split("\n\n")[-1]
        assert last_before_note.startswith(f"Turn {before - 1}.")


def test_no_authors_note_leaves_one_history_section():
    built = build_context(turn(campaign=campaign(authors_note="")))
    assert "authors_note" not in labels(built)
    assert "recent_history" not in labels(built)


def test_history_is_the_newest_contiguous_stretch():
    built = build_context(turn(history=story(500), settings=settings(4096)))
    history = built.report["history"]
    assert 0 < history["included"] < 500
    assert history["included_ids"] == list(range(500 - history["included"], 500))
    assert history["total"] == 500
    assert history["oldest_truncated"] is False


def test_newest_action_alone_over_budget_keeps_its_end():
    text = " ".join(f"word{i}" for i in range(12000)) + " THE END"
    built = build_context(turn(history=(HistoryAction(1, "ai", text),), settings=settings(4096)))
    history = built.report["history"]
    kept = section(built, "recent_history")["text"]
    assert history["oldest_truncated"] is True
    assert history["included_ids"] == [1]
    assert text.endswith(kept)
    assert len(kept) < len(text)
    tokens = built.report["tokens"]
    assert tokens["history_spent"] <= tokens["available_for_history"] - tokens["knowledge_spent"]


def test_precomputed_action_tokens_are_trusted():
    overstated = tuple(HistoryAction(a.id, a.kind, a.text, tokens=100_000) for a in story(20))
    built = build_context(turn(history=overstated))
    assert built.report["history"]["oldest_truncated"] is True
    assert built.report["history"]["included_ids"] == [19]


def test_pending_reader_input_is_the_newest_action_and_is_never_dropped():
    long_input = "I tell Aldric everything. " * 300
    built = build_context(
        turn(history=story(300), history_total=301, player_text=long_input,
             settings=settings(4096))
    )
    history = built.report["history"]
    assert section(built, "recent_history")["text"].endswith(long_input.strip())
    assert history["total"] == 301
    assert history["included"] == len(history["included_ids"]) + 1
    assert built.report["tokens"]["protected"] > count_tokens(long_input)


@pytest.mark.parametrize(
    "inputs",
    [full_turn(), full_turn(history=story(3)), full_turn(knowledge=library(per_class=30)),
     turn(campaign=Campaign(), memories=(), summary=None, narrative_state={}),
     turn(history=tuple(HistoryAction(i, "ai", f"  Turn {i} ends in spaces. \n ")
                        for i in range(50)))],
)
def test_section_tokens_add_up_to_the_total_within_the_separator_allowance(inputs):
    built = build_context(inputs)
    report = built.report
    separators = len(report["sections"]) - 2
    section_sum = sum(s["tokens"] for s in report["sections"])
    assert 0 <= report["tokens"]["total"] - section_sum <= separators
    for s in report["sections"]:
        assert count_tokens(s["text"]) <= s["tokens"]
    exact = count_tokens(built.system_text) + count_tokens(built.story_text)
    assert exact <= report["tokens"]["total"]


def test_inferred_memories_are_marked_and_recorded_ones_are_not():
    built = build_context(turn())
    text = section(built, "used_memories")["text"]
    assert "- [inferred] Aldric fears the sea." in text
    assert "- Aldric owes Mara a favour." in text
    assert "interpretation, not established fact" in text
    assert [m["authority"] for m in built.report["memories"]["used"]] == ["recorded", "inferred"]


def test_hidden_passages_carry_the_marker_and_bring_the_hidden_rule():
    built = build_context(full_turn())
    assert HIDDEN_RULE in section(built, "knowledge_rule")["text"]
    assert HIDDEN_MARKER in section(built, "knowledge_canon")["text"]
    assert HIDDEN_MARKER not in section(built, "knowledge_reference")["text"]


@pytest.mark.parametrize(
    ("window", "budget", "capped"),
    [
        (None, 8192, False),
        (Window(verified=True, tokens=4096, source="props"), 4096, True),
        (Window(verified=True, tokens=32768, source="props"), 8192, False),
        (Window(verified=False, tokens=2048, source="unknown"), 8192, False),
        (Window(verified=True, tokens=None, source="props"), 8192, False),
    ],
)
def test_only_a_verified_smaller_window_caps_the_budget(window, budget, capped):
    report = build_context(full_turn(window=window)).report
    assert report["tokens"]["budget"] == budget
    assert report["tokens"]["configured_budget"] == 8192
    assert report["window"]["capped"] is capped
    assert report["tokens"]["total"] + report["tokens"]["output_reserve"] <= budget


def test_an_empty_campaign_gets_the_default_narrator_rules_and_nothing_else_it_lacks():
    built = build_context(turn(campaign=Campaign()))
    assert section(built, "narrator")["text"] == DEFAULT_NARRATOR_PROMPT
    assert labels(built)[:2] == ["narrator", "state_rule"]
    absent = {"campaign_canon", "persona", "plot_essentials", "authors_note"}
    assert not absent & set(labels(built))


def test_a_narrator_override_replaces_the_default():
    built = build_context(turn(campaign=campaign(narrator_prompt="  Narrate as a sea shanty.  ")))
    assert section(built, "narrator")["text"] == "Narrate as a sea shanty."


def test_report_has_the_stored_shape_and_survives_json():
    inputs = full_turn(derived=({"job": "memories", "state": "failing", "error": "timeout"},))
    report = build_context(inputs).report
    assert set(report) == {"sections", "prompt", "tokens", "window", "memories", "summary",
                           "derived", "knowledge", "history", "settings"}
    assert set(report["tokens"]) == {"total", "budget", "configured_budget", "output_reserve",
                                     "protected", "available_for_history", "history_spent",
                                     "knowledge_spent", "unused"}
    assert report["summary"] == {"text": "Mara fled the capital.", "covers_through": 12,
                                 "covers_actions": 13}
    assert report["derived"] == [{"job": "memories", "state": "failing", "error": "timeout"}]
    assert report["settings"]["context_token_budget"] == 8192
    assert report["window"]["verified"] is False
    assert json.loads(json.dumps(report)) == report


def test_without_knowledge_the_report_keeps_the_knowledge_keys():
    with_library = build_context(full_turn()).report["knowledge"]
    without = build_context(full_turn(knowledge=None)).report["knowledge"]
    assert set(without) == set(with_library)
    assert without["used"] == without["dropped"] == without["suppressed"] == []


def test_no_summary_reports_none():
    report = build_context(turn(summary=None)).report
    assert report["summary"] is None
    assert "story_summary" not in [s["label"] for s in report["sections"]]
