"""At a small window the story keeps at least half of the prompt: compact
rules, a reply reserve that scales with the window, and the inspector's
advice when the settings still crowd the story out (issue 26, item 8)."""

from contextbuild import ModelSettings, build_context, rules, smallwindow
from tests.contextbuild.samples import story, turn


def _settings(budget, output=600):
    return ModelSettings(model="test-model", context_token_budget=budget, max_output_tokens=smallwindow.reply_cap(
        output, budget), configured_max_output_tokens=output)


def _section(built, label):
    return next(s for s in built.report["sections"] if s["label"] == label)


def test_a_small_window_gets_the_compact_rules_and_a_large_one_the_full():
    small = build_context(turn(settings=_settings(2048), history=story(100, words=3)))
    large = build_context(turn(settings=_settings(8192), history=story(100, words=3)))
    assert _section(small, "state_rule")["text"] == rules.COMPACT_STATE_RULE
    assert _section(small, "narrator")["text"] == rules.COMPACT_NARRATOR_PROMPT
    assert _section(large, "state_rule")["text"] == rules.STATE_RULE
    assert _section(small, "state_rule")["tokens"] * 3 < _section(large, "state_rule")["tokens"]
    assert small.report["settings"]["compact_rules"] and not large.report["settings"]["compact_rules"]


def test_the_compact_state_rule_still_names_every_event_type_and_the_block():
    for word in ("<state>", "scene", "move", "entity", "item", "thread", '"you"'):
        assert word in rules.COMPACT_STATE_RULE


def test_the_reply_reserve_scales_with_the_window():
    assert smallwindow.reply_cap(600, 2048) == 341
    assert smallwindow.reply_cap(600, 8192) == 600
    assert smallwindow.reply_cap(600, 512) == smallwindow.MIN_REPLY
    assert smallwindow.reply_cap(100, 2048) == 100


def test_fifty_turns_at_2048_keep_at_least_half_the_prompt_for_the_story():
    built = build_context(turn(settings=_settings(2048), history=story(100, words=3)))
    tokens = built.report["tokens"]
    assert tokens["history_spent"] >= tokens["total"] * smallwindow.STORY_SHARE, tokens
    assert built.report["history"]["included"] >= 8
    assert built.report["window_advice"] == ""
    assert built.report["settings"]["max_output_tokens"] == 341
    assert built.report["settings"]["configured_max_output_tokens"] == 600


def test_settings_that_crowd_the_story_out_get_advice():
    crowded = turn(settings=_settings(1024), history=story(60, words=3))
    built = build_context(crowded)
    advice = built.report["window_advice"]
    assert advice.startswith("The window is small for these settings: the story kept")
    assert "a model server started with a larger window" in advice


def test_a_short_story_that_fits_gets_no_advice():
    built = build_context(turn(settings=_settings(1024), history=story(3, words=1)))
    assert built.report["window_advice"] == ""
