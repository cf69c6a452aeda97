import json
import re

import pytest

from contextbuild import (
    EMIT_REMINDER,
    STATE_RULE,
    Campaign,
    Persona,
    build_context,
    render_canon,
    render_persona,
    render_refusals,
    render_state,
    rules,
)
from contextbuild.state import apply_events
from contextbuild.tokens import count_tokens
from tests.contextbuild.samples import STATE, turn


def test_state_shows_scene_location_entities_and_open_threads():
    text = render_state(STATE)
    assert "Scene: Mara waits at the quay." in text
    assert "Location: Westhaven harbour" in text
    assert "- Aldric [aldric] (alive; also called the harbourmaster)" in text
    assert "- Return the broken seal [seal]" in text


def test_state_shows_what_you_carry_and_where_others_are_and_what_they_hold():
    text = render_state({
        **STATE, "inventory": ["the broken seal", "a knife"],
        "entities": {"aldric": {"name": "Aldric", "status": "alive", "location": "the customs house",
                                "items": ["the ledger"]}},
    })
    assert "You carry: the broken seal, a knife" in text
    assert "- Aldric [aldric] (alive; at the customs house; holds the ledger)" in text


def test_state_leaves_out_resolved_threads():
    assert "Pay the ferryman" not in render_state(STATE)


@pytest.mark.parametrize(
    "state",
    [
        {},
        None,
        {"scene": {}, "entities": {}, "threads": {}},
        {"threads": {"x": {"status": "resolved"}}},
    ],
)
def test_state_is_empty_when_there_is_nothing_to_say(state):
    assert render_state(state) == ""


def test_state_tolerates_malformed_entries():
    text = render_state({"entities": {"ghost": "not a dict"}, "scene": "not a dict"})
    assert "- ghost [ghost]" in text


def test_canon_states_rules_and_forbidden_changes():
    campaign = Campaign(
        canon_rules=("Magic always costs blood.", "  "),
        forbidden_status_changes=(("dead", "alive"),),
    )
    assert render_canon(campaign) == (
        "Campaign canon (these are true and may not be contradicted):\n"
        "- Magic always costs blood.\n"
        "- Nothing that is dead can become alive."
    )


def test_canon_is_empty_without_rules():
    assert render_canon(Campaign()) == ""


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        (
            Persona("Mara", "she/her", "A smuggler."),
            "Player character:\nYou are Mara (she/her). A smuggler.",
        ),
        (Persona("Mara"), "Player character:\nYou are Mara."),
        (Persona(description="A smuggler."), "Player character:\nA smuggler."),
        (Persona(pronouns="she/her"), ""),
        (Persona(), ""),
    ],
)
def test_persona_needs_a_name_or_a_description(persona, expected):
    assert render_persona(persona) == expected


def test_refusals_list_each_refused_change():
    text = render_refusals(("aldric: dead -> alive is forbidden", ""))
    assert "- aldric: dead -> alive is forbidden" in text
    assert text.count("\n- ") == 1


def test_no_refusal_note_without_refusals():
    assert render_refusals(()) == ""


def test_state_rule_example_is_a_valid_block_that_applies_cleanly():
    block = re.findall(r"<state>(\{.*\})</state>", STATE_RULE)[-1]
    events = json.loads(block)["events"]
    assert {event["type"] for event in events} == {"move", "item", "entity", "thread"}
    known = {"inventory": ["a coin"], "threads": {"entry": {"title": "Get in", "status": "open"}}}
    assert apply_events(known, events).refused == ()


def test_state_rule_lists_every_event_type_apply_events_reads():
    for kind in ("scene", "move", "entity", "item", "thread"):
        assert f"- {kind} (" in STATE_RULE


def test_the_system_message_stays_small():
    assert count_tokens(build_context(turn()).system_text) < 680


def test_emit_reminder_repeats_the_block_demand():
    assert "<state>" in EMIT_REMINDER


@pytest.mark.parametrize("reply, kept", [
    ("[Hard limit: this turn must not exceed 371 words. Write only as much]\nThe rain falls.", "The rain falls."),
    ("[Authoritative: this turn should not exceed 371 words…\nThe rain falls.", "The rain falls."),
    ("The rain falls. [Author's note: keep it grim] It stops.", "The rain falls. It stops."),
    ("The rain falls.\n\n[End your reply with the state block: <state>{\"events\": [...]}</state>]", "The rain falls."),
    ("The chest holds [three] coins.", "The chest holds [three] coins."),
])
def test_a_copied_instruction_is_taken_out_of_the_prose(reply, kept):
    assert rules.strip_echoed_instructions(reply) == kept


def test_the_state_rule_example_names_no_campaigns_people():
    for name in ("Mara", "Aldric", "Westhaven"):
        assert name not in rules.STATE_RULE
