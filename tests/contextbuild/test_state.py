"""The narrator's state block, read tolerantly and applied event by event."""

import pytest

from contextbuild.state import apply_block, apply_events, parse_block

STATE = {
    "scene": {"summary": "Mara waits at the quay.", "location": "Westhaven harbour"},
    "entities": {"aldric": {"name": "Aldric", "status": "dead"}},
    "threads": {"seal": {"title": "Return the broken seal", "status": "open"}},
}
DEAD_STAYS_DEAD = (("dead", "alive"),)


@pytest.mark.parametrize(
    "body",
    [
        '{"events": [{"type": "scene", "location": "the ferry"}]}',
        '```json\n{"events": [{"type": "scene", "location": "the ferry"},]}\n```',
        '[{"type": "scene", "location": "the ferry"}]',
        '{"events": [{"type": "scene", "location": "the ferry",}],}',
    ],
)
def test_nearly_right_json_is_read(body):
    events, note = parse_block(body)
    assert note == "" and events == [{"type": "scene", "location": "the ferry"}]


@pytest.mark.parametrize(
    ("body", "why"),
    [(None, "no state block"), ("{events: [}", "not valid JSON"), ('{"changes": []}', 'no "events" list'),
     ("42", 'no "events" list')],
)
def test_an_unreadable_block_changes_nothing_and_says_why(body, why):
    outcome = apply_block(STATE, body)
    assert outcome.state == STATE and outcome.state is not STATE
    assert why in outcome.note and outcome.applied == () and outcome.refused == ()


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"type": "scene", "summary": "You board the ferry.", "location": "the ferry"},
         {"scene": {"summary": "You board the ferry.", "location": "the ferry"}}),
        ({"type": "scene", "location": "the ferry"},
         {"scene": {"summary": "Mara waits at the quay.", "location": "the ferry"}}),
        ({"type": "entity", "id": "ferryman", "name": "The ferryman", "status": "wary", "aliases": ["Old Tam"]},
         {"entities": {**STATE["entities"], "ferryman": {"name": "The ferryman", "status": "wary", "aliases": ["Old Tam"]}}}),
        ({"type": "entity", "id": "aldric", "aliases": ["the harbourmaster"]},
         {"entities": {"aldric": {"name": "Aldric", "status": "dead", "aliases": ["the harbourmaster"]}}}),
        ({"type": "thread", "id": "seal", "status": "resolved"},
         {"threads": {"seal": {"title": "Return the broken seal", "status": "resolved"}}}),
        ({"type": "thread", "id": "fare", "title": "Pay the ferryman"},
         {"threads": {**STATE["threads"], "fare": {"title": "Pay the ferryman", "status": "open"}}}),
    ],
)
def test_a_valid_event_is_applied(event, expected):
    outcome = apply_events(STATE, [event], forbidden=DEAD_STAYS_DEAD)
    assert outcome.refused == () and outcome.applied == (event,)
    assert outcome.state == {**STATE, **expected}


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ({"type": "entity", "id": "aldric", "status": "Alive"}, "cannot go from dead to alive (campaign canon)"),
        ({"type": "entity", "id": "Old Tam", "name": "Old Tam"}, "is not lowercase"),
        ({"type": "entity", "id": "tam"}, "is new and has no name"),
        ({"type": "entity", "id": "tam", "name": "Tam", "aliases": "Tammy"}, "aliases must be a list"),
        ({"type": "thread", "id": "seal", "status": "abandoned"}, "is not open or resolved"),
        ({"type": "thread", "id": "fare"}, "is new and has no title"),
        ({"type": "scene"}, "names neither a summary nor a location"),
        ({"type": "weather", "summary": "rain"}, 'unknown type "weather"'),
        ("rain", "is not an object"),
    ],
)
def test_an_invalid_event_is_refused_with_its_reason_and_changes_nothing(event, why):
    outcome = apply_events(STATE, [event], forbidden=DEAD_STAYS_DEAD)
    assert outcome.state == STATE and outcome.applied == ()
    [reason] = outcome.refused
    assert why in reason


def test_one_bad_event_does_not_cost_the_good_ones():
    events = [{"type": "entity", "id": "aldric", "status": "alive"}, {"type": "scene", "location": "the ferry"}]
    outcome = apply_events(STATE, events, forbidden=DEAD_STAYS_DEAD)
    assert outcome.state["scene"]["location"] == "the ferry"
    assert outcome.state["entities"]["aldric"]["status"] == "dead"
    assert len(outcome.refused) == 1 and outcome.refused[0].startswith("entity event 1:")
    assert outcome.as_record() == {"applied": [events[1]], "refused": list(outcome.refused), "note": ""}


def test_the_input_state_is_never_mutated():
    before = {"scene": {"summary": "x"}, "entities": {}}
    apply_events(before, [{"type": "scene", "summary": "y"}, {"type": "entity", "id": "a", "name": "A"}])
    assert before == {"scene": {"summary": "x"}, "entities": {}}
