"""The narrative state record, and the narrator's state block read tolerantly and
applied event by event."""

import pytest

from contextbuild.narrative import MAX_ENTITIES, MAX_FIELD, MAX_ITEMS, NarrativeState
from contextbuild.rules import PROMPT_ENTITIES, render_state
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
    assert outcome.as_record() == {"applied": [events[1]], "refused": list(outcome.refused), "note": "",
                                   "clamped": []}


def test_the_input_state_is_never_mutated():
    before = {"scene": {"summary": "x"}, "entities": {}}
    apply_events(before, [{"type": "scene", "summary": "y"}, {"type": "entity", "id": "a", "name": "A"}])
    assert before == {"scene": {"summary": "x"}, "entities": {}}


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"type": "move", "id": "you", "to": "the ferry"},
         {"scene": {"summary": "Mara waits at the quay.", "location": "the ferry"}}),
        ({"type": "move", "id": "aldric", "to": "the customs house"},
         {"entities": {"aldric": {"name": "Aldric", "status": "dead", "location": "the customs house"}}}),
        ({"type": "item", "id": "you", "item": "a brass key", "change": "gained"},
         {"inventory": ["the lantern", "a brass key"]}),
        ({"type": "item", "id": "you", "item": "The lantern", "change": "lost"}, {"inventory": []}),
        ({"type": "item", "id": "you", "item": "lantern", "change": "gain"}, {"inventory": ["the lantern"]}),
        ({"type": "item", "id": "aldric", "item": "the ledger", "change": "gained"},
         {"entities": {"aldric": {"name": "Aldric", "status": "dead", "items": ["the ledger"]}}}),
    ],
)
def test_a_move_or_an_item_is_applied(event, expected):
    before = {**STATE, "inventory": ["the lantern"]}
    outcome = apply_events(before, [event], forbidden=DEAD_STAYS_DEAD)
    assert outcome.refused == () and outcome.applied == (event,)
    assert outcome.state == {key: value for key, value in {**before, **expected}.items() if value}


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ({"type": "move", "id": "tam", "to": "the ferry"}, "move event 1: “tam” is not in the narrative state"),
        ({"type": "move", "id": "you"}, "move event 1: it names no place"),
        ({"type": "move", "id": "The Player", "to": "the ferry"}, 'the player character is "you"'),
        ({"type": "item", "id": "you", "item": "a brass key", "change": "lost"},
         "item event 1: “a brass key” is not held by you"),
        ({"type": "item", "id": "aldric", "item": "the lantern", "change": "lost"},
         "item event 1: “the lantern” is not held by “Aldric”"),
        ({"type": "item", "id": "tam", "item": "a rope", "change": "gained"}, "“tam” is not in the narrative state"),
        ({"type": "item", "id": "you", "item": "a rope", "change": "stolen"}, 'the change "stolen" is not gained or lost'),
        ({"type": "item", "id": "you", "change": "gained"}, "item event 1: it names no item"),
        ({"type": "entity", "id": "you", "name": "Mara"}, "entity event 1: “you” is the player character"),
    ],
)
def test_an_invalid_move_or_item_is_refused_with_its_reason(event, why):
    before = {**STATE, "inventory": ["the lantern"]}
    outcome = apply_events(before, [event], forbidden=DEAD_STAYS_DEAD)
    assert outcome.state == before and outcome.applied == ()
    [reason] = outcome.refused
    assert why in reason


def test_an_entity_introduced_in_the_block_can_move_and_take_things_in_it():
    events = [{"type": "entity", "id": "tam", "name": "Tam"}, {"type": "move", "id": "tam", "to": "the ferry"},
              {"type": "item", "id": "tam", "item": "an oar", "change": "gained"}]
    outcome = apply_events(STATE, events)
    assert outcome.refused == ()
    assert outcome.state["entities"]["tam"] == {"name": "Tam", "location": "the ferry", "items": ["an oar"]}


def test_what_the_player_carries_stops_growing_at_its_cap():
    events = [{"type": "item", "id": "you", "item": f"stone {n}", "change": "gained"} for n in range(MAX_ITEMS + 1)]
    outcome = apply_events({}, events)
    assert len(outcome.applied) == len(events) - 1
    [reason] = outcome.refused
    assert reason.startswith(f"item event {len(events)}:")


def test_past_its_cap_the_state_lets_go_of_the_least_recently_touched_entity():
    events = [{"type": "entity", "id": f"e{n}", "name": f"E{n}"} for n in range(MAX_ENTITIES)]
    events.append({"type": "entity", "id": "e0", "status": "back"})
    events.append({"type": "entity", "id": "newcomer", "name": "The newcomer"})
    outcome = apply_events({}, events)
    assert outcome.refused == ()
    kept = list(outcome.state["entities"])
    assert len(kept) == MAX_ENTITIES and "e1" not in kept and kept[-2:] == ["e0", "newcomer"]


def test_the_prompt_shows_the_most_recently_touched_entities_only():
    state = {"entities": {f"e{n}": {"name": f"Person {n}"} for n in range(PROMPT_ENTITIES + 3)}}
    text = render_state(state)
    assert f"Person {PROMPT_ENTITIES + 2}" in text and "Person 2 [" not in text and "Person 3 [" in text
    assert "(3 more met earlier" in text


@pytest.mark.parametrize(
    "doc",
    [STATE, {}, {"scene": {"location": "the ferry"}},
     {"entities": {"tam": {"name": "Tam", "aliases": ["Old Tam"], "location": "the ferry", "items": ["an oar"]}},
      "inventory": ["a knife"]}],
)
def test_a_well_formed_document_reads_back_exactly(doc):
    state, problems = NarrativeState.read(doc)
    assert problems == () and state.as_document() == doc


@pytest.mark.parametrize(
    ("doc", "problem", "kept"),
    [
        ("a string", "not a JSON object", {}),
        ({"scene": "the quay"}, "scene is not an object", {}),
        ({"scene": {"summary": "x" * (MAX_FIELD + 9)}}, "longer than", {"scene": {"summary": "x" * MAX_FIELD}}),
        ({"entities": {"ghost": "not a dict"}}, "“ghost” has no name", {"entities": {"ghost": {}}}),
        ({"entities": {"Old Tam": {"name": "Tam"}}}, "“Old Tam” is not an id", {"entities": {"Old Tam": {"name": "Tam"}}}),
        ({"entities": {"tam": {"name": "Tam", "aliases": "Old Tam"}}}, "aliases of “tam” is not a list",
         {"entities": {"tam": {"name": "Tam"}}}),
        ({"entities": {"tam": {"name": 7}}}, "name of “tam” is not text", {"entities": {"tam": {}}}),
        ({"threads": {"seal": {"title": "Return it", "status": "abandoned"}}}, "open or resolved",
         {"threads": {"seal": {"title": "Return it", "status": "resolved"}}}),
        ({"threads": {"seal": {"title": "Return it", "status": ""}}}, None,
         {"threads": {"seal": {"title": "Return it", "status": "open"}}}),
        ({"inventory": ["a knife", "the knife", 3]}, "What you carry is not text", {"inventory": ["a knife"]}),
        ({"entities": {f"e{n}": {"name": "E"} for n in range(MAX_ENTITIES + 5)}}, f"Only the {MAX_ENTITIES} most recent",
         None),
    ],
)
def test_a_malformed_document_is_read_tolerantly_and_its_problems_named(doc, problem, kept):
    state, problems = NarrativeState.read(doc)
    if problem is None:
        assert problems == ()
    else:
        assert any(problem in p for p in problems), problems
    if kept is not None:
        assert state.as_document() == kept
    assert len(state.entities) <= MAX_ENTITIES


def test_what_is_applied_only_in_part_is_recorded_as_clamped():
    events = [{"type": "entity", "id": f"e{n}", "name": f"E{n}"} for n in range(MAX_ENTITIES + 1)]
    events.append({"type": "scene", "summary": "x" * (MAX_FIELD + 1)})
    outcome = apply_events({}, events)
    assert outcome.refused == ()
    assert outcome.clamped == (
        f"entity event {MAX_ENTITIES + 1}: the entity “e0” was let go to make room (the least recently touched)",
        f"scene event {MAX_ENTITIES + 2}: summary cut to {MAX_FIELD} characters",
    )
    assert outcome.as_record()["clamped"] == list(outcome.clamped)


@pytest.mark.parametrize("kind", [["scene"], {"a": 1}, 7, None])
def test_an_event_type_that_is_not_text_is_refused_not_raised(kind):
    outcome = apply_events({}, [{"type": kind, "summary": "x"}])
    assert outcome.applied == () and "unknown type" in outcome.refused[0]
