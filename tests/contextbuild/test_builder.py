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
from contextbuild.builder import MESSAGE_OVERHEAD, REPLY_PRIMING, render_transcript, token_scale
from contextbuild.rules import BEGIN_CUE, CONTINUE_CUE, HIDDEN_MARKER, HIDDEN_RULE
from tests.contextbuild.samples import campaign, candidate, knowledge, story, turn

DESIGN_ORDER = [
    "narrator", "state_rule", "campaign_canon", "knowledge_rule", "always_canon",
    "ai_instructions", "persona", "plot_essentials", "length_hint", "state_reminder",
    "authors_note", "story_summary", "knowledge_inspiration", "knowledge_reference", "knowledge_canon",
    "used_memories", "narrative_state", "state_refusals", "player_input",
]
HISTORY_LABELS = {"player_action", "narration"}
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
    built = build_context(full_turn())
    assert [label for label in labels(built) if label not in HISTORY_LABELS] == DESIGN_ORDER
    blocks = [s["block"] for s in built.report["sections"]]
    assert blocks == sorted(blocks, key=["system", "history", "turn"].index)


def test_the_prompt_is_a_conversation_ending_with_the_readers_action():
    built = build_context(full_turn())
    messages = built.messages
    system = [s["text"] for s in built.report["sections"] if s["block"] == "system"]
    assert messages[0] == {"role": "system", "content": "\n\n".join(system)}
    roles = [m["role"] for m in messages[1:]]
    assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2)
    assert roles[-1] == "user"
    assert messages[-1]["content"].endswith(PLAYER)
    assert built.system_text == messages[0]["content"]
    assert built.story_text == render_transcript(messages[1:])
    assert built.report["prompt"]["messages"] == list(messages)
    assert built.report["prompt"]["mode"] == "chat"


def test_the_readers_stored_action_ends_the_prompt_after_the_live_sections():
    history = (*story(9), HistoryAction(9, "player", PLAYER))
    built = build_context(turn(history=history, player_text=""))
    last = built.messages[-1]
    assert last["role"] == "user"
    assert last["content"].endswith(PLAYER)
    assert last["content"].index("Current narrative state") < last["content"].index(PLAYER)
    assert built.report["history"]["included_ids"][-1] == 9
    assert section(built, "player_input")["text"] == PLAYER


def test_consecutive_actions_of_one_speaker_share_a_message():
    history = (HistoryAction(1, "player", "I wait."), HistoryAction(2, "player", "I wait longer."),
               HistoryAction(3, "ai", "Nothing happens."))
    built = build_context(turn(history=history, player_text=PLAYER))
    assert [m["role"] for m in built.messages] == ["system", "user", "assistant", "user"]
    assert built.messages[1]["content"] == "I wait.\n\nI wait longer."


def test_a_story_that_opens_with_a_narration_gets_the_opening_cue_first():
    history = (HistoryAction(1, "ai", "The quay is cold."),)
    built = build_context(turn(history=history, player_text=PLAYER))
    assert [m["role"] for m in built.messages] == ["system", "user", "assistant", "user"]
    assert built.messages[1]["content"] == BEGIN_CUE


@pytest.mark.parametrize(("history", "cue"), [((), BEGIN_CUE), (story(4), CONTINUE_CUE)])
def test_a_turn_without_a_new_action_ends_on_a_cue(history, cue):
    built = build_context(turn(history=history, player_text=""))
    assert built.messages[-1]["role"] == "user"
    assert built.messages[-1]["content"].endswith(cue)


def test_completions_mode_renders_the_same_content_as_one_labelled_text():
    built = build_context(full_turn(settings=ModelSettings(model="m", api_mode="completions")))
    text = built.prompt_text
    assert text.startswith(built.system_text)
    assert text.endswith(f"Reader: {built.messages[-1]['content']}\n\nNarrator:")
    assert "Narrator: " in text and built.report["prompt"]["text"] == text


@pytest.mark.parametrize(
    ("budget", "output"),
    [(2500, 200), (3000, 600), (4096, 600), (4096, 1500), (8192, 600),
     (8192, 2400), (16000, 1000), (32000, 4000)],
)
@pytest.mark.parametrize("ratio", [None, 0.9, 1.04, 1.3])
def test_reply_reserve_is_never_spent(budget, output, ratio):
    built = build_context(full_turn(settings=settings(budget, output), history=story(600),
                                    knowledge=library(per_class=30), token_ratio=ratio))
    tokens = built.report["tokens"]
    scale = token_scale(ratio)
    assert tokens["output_reserve"] == output + 64
    exact = sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD for m in built.messages) + REPLY_PRIMING
    assert exact <= tokens["total"]
    assert tokens["total"] * scale + tokens["output_reserve"] <= budget
    assert tokens["protected"] + tokens["available_for_history"] == tokens["prompt_capacity"]
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
    assert built.messages[-1]["content"].endswith(PLAYER)
    assert tokens["knowledge_spent"] <= int(tokens["available_for_history"] * 0.33)
    assert tokens["total"] * token_scale(None) + tokens["output_reserve"] <= budget


def test_unspent_knowledge_budget_goes_back_to_history():
    with_library = build_context(full_turn(history=story(400)))
    without = build_context(full_turn(history=story(400), knowledge=None))
    assert (without.report["tokens"]["history_spent"]
            > with_library.report["tokens"]["history_spent"])
    assert without.report["knowledge"]["used"] == []


@pytest.mark.parametrize("player", ["", PLAYER])
def test_authors_note_opens_the_turns_message_and_never_enters_history(player):
    built = build_context(turn(history=story(10), player_text=player))
    last = built.messages[-1]["content"]
    assert last.startswith("[Author's note: Keep the tone grim.]")
    assert not any("Author's note" in m["content"] for m in built.messages[:-1])


def test_no_authors_note_leaves_it_out():
    built = build_context(turn(campaign=campaign(authors_note="")))
    assert "authors_note" not in labels(built)


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
    kept = section(built, "narration")["text"]
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
    assert built.messages[-1]["content"].endswith(long_input.strip())
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
    separators = len(report["sections"])
    section_sum = sum(s["tokens"] for s in report["sections"])
    history = sum(1 for s in report["sections"] if s["block"] == "history")
    overheads = MESSAGE_OVERHEAD * (history + 3) + REPLY_PRIMING + count_tokens(BEGIN_CUE)
    assert 0 <= report["tokens"]["total"] - section_sum <= separators + overheads
    for s in report["sections"]:
        assert count_tokens(s["text"]) <= s["tokens"]
    exact = sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD for m in built.messages) + REPLY_PRIMING
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
                           "derived", "cast", "knowledge", "history", "settings", "state", "window_advice", "world_info"}
    assert set(report["tokens"]) == {"total", "budget", "configured_budget", "output_reserve",
                                     "prompt_capacity", "ratio_budgeted", "ratio_on_profile",
                                     "protected", "available_for_history", "history_spent",
                                     "knowledge_spent", "unused", "server_prompt_tokens", "ratio"}
    assert report["summary"] == {"text": "Mara fled the capital.", "covers_through": 12,
                                 "covers_actions": 13, "parts": []}
    assert report["state"] == inputs.narrative_state
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


def test_history_keeps_its_anchor_so_the_prefix_stays_the_same_between_turns():
    first = build_context(turn(history=story(400), settings=settings(4096)))
    anchor = first.report["history"]["anchor"]
    assert anchor is not None and anchor > 0
    grown = (*story(402),)
    second = build_context(turn(history=grown, settings=settings(4096), history_anchor=anchor))
    assert second.report["history"]["anchor"] == anchor
    assert second.report["history"]["anchor_kept"] is True
    assert list(second.messages[: len(first.messages) - 1]) == list(first.messages[:-1])


def test_history_drops_past_the_anchor_with_slack_when_it_no_longer_fits():
    first = build_context(turn(history=story(400), settings=settings(4096)))
    anchor = first.report["history"]["anchor"]
    later = build_context(turn(history=story(600), settings=settings(4096), history_anchor=anchor))
    tokens = later.report["tokens"]
    assert later.report["history"]["anchor"] > anchor
    assert later.report["history"]["anchor_kept"] is False
    room = tokens["available_for_history"] - tokens["knowledge_spent"]
    assert tokens["history_spent"] <= room * 0.75


def test_a_measured_token_ratio_shrinks_what_the_prompt_may_spend():
    plain = build_context(full_turn(history=story(600), token_ratio=1.0)).report["tokens"]
    heavy = build_context(full_turn(history=story(600), token_ratio=1.3)).report["tokens"]
    assert heavy["prompt_capacity"] < plain["prompt_capacity"]
    assert heavy["history_spent"] < plain["history_spent"]


def test_long_memory_stays_within_its_shares_of_a_small_window():
    from contextbuild.builder import MEMORY_SHARE, STATE_SHARE
    from contextbuild.records import Memory

    memories = tuple(Memory(f"Memory {i}: " + "the tide turned again " * 60, "recorded", 1.0 - i / 10, i)
                     for i in range(6))
    cast = {f"p{i}": {"name": f"Person {i}", "status": "wary " * 40, "items": ["a rope"] * 1} for i in range(12)}
    built = build_context(full_turn(settings=settings(budget=2048, output=200), memories=memories,
                                    narrative_state={"entities": cast}, knowledge=None))
    assert section(built, "used_memories")["tokens"] <= 2048 * MEMORY_SHARE + 5
    assert section(built, "narrative_state")["tokens"] <= 2048 * STATE_SHARE
    report = built.report["memories"]
    assert report["used"] and [m["source_action"] for m in report["used"] + report["dropped"]] == list(range(6))
    assert "more met earlier" in next(s["text"] for s in built.report["sections"] if s["label"] == "narrative_state")


def test_continue_in_completions_mode_ends_on_the_last_narrations_own_text():
    history = story(6)
    built = build_context(turn(history=history, player_text="",
                               settings=ModelSettings(model="m", api_mode="completions", instruct_template="chatml")))
    text = built.prompt_text
    assert text.endswith("<|im_start|>assistant\n" + history[-1].text)
    assert CONTINUE_CUE not in text
    assert "[Author's note: Keep the tone grim.]" in text.rsplit("<|im_start|>assistant", 1)[0]
    assert built.messages[-1]["content"].endswith(CONTINUE_CUE), "chat mode still asks for the continuation"


def test_a_new_action_in_completions_mode_ends_on_the_narrators_prefix():
    built = build_context(full_turn(settings=ModelSettings(model="m", api_mode="completions", instruct_template="chatml")))
    assert built.prompt_text.endswith(f"{PLAYER}<|im_end|>\n<|im_start|>assistant\n")
