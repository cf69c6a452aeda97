"""Reading the narrator's state block and applying it to the narrative state.

The state rule (rules.STATE_RULE) asks the narrator to end each reply with
`<state>{"events": [...]}</state>`. A model's JSON is often nearly right, so
the parser forgives what costs nothing to forgive (a code fence, a trailing
comma, a bare list of events); anything it still cannot read leaves the
state as it was, with a note, and never costs the turn its prose.

Each event is checked on its own: a bad one is refused with its reason and
the rest still apply. Refusals are what the next prompt tells the narrator
(rules.render_refusals), so each reason names the event it refuses.
"""


from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from .narrative import (
    ID,
    MAX_ALIASES,
    MAX_FIELD,
    MAX_ITEMS,
    PLAYER,
    THREAD_STATUSES,
    Entity,
    NarrativeState,
    SeatState,
    Thread,
    holds,
    seat_key,
    without,
)

#: How an item event may say which way the item went.
GAINED, LOST = ("gained", "gain"), ("lost", "lose")


@dataclass(frozen=True)
class Outcome:
    """The state after the block (as its stored document), what was applied,
    what was refused and why, and a note when the block itself could not be
    read."""

    state: dict
    applied: tuple[dict, ...] = ()
    refused: tuple[str, ...] = ()
    note: str = ""
    #: Applied, but not wholly: a text cut to its cap, or an old entity or
    #: thread let go to make room.
    clamped: tuple[str, ...] = ()

    def as_record(self) -> dict:
        """This turn's state events, as the snapshot's report stores them."""
        return {"applied": [dict(e) for e in self.applied], "refused": list(self.refused), "note": self.note,
                "clamped": list(self.clamped)}


def parse_block(body: str | None) -> tuple[list | None, str]:
    """The block's events, or None and why it could not be read."""
    if body is None:
        return None, "The reply had no state block; the narrative state is unchanged."
    text = body.strip()
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", text).strip()
    text = re.sub(r",\s*([\]}])", r"\1", text)
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"The state block was not valid JSON ({exc.msg}); the narrative state is unchanged."
    if isinstance(data, list):
        data = {"events": data}
    if not isinstance(data, dict) or not isinstance(data.get("events"), list):
        return None, 'The state block had no "events" list; the narrative state is unchanged.'
    return data["events"], ""


def apply_block(state: dict, body: str | None, *, forbidden: tuple[tuple[str, str], ...] = (),
                seats: tuple[str, ...] = ()) -> Outcome:
    """The state after the reply's block (see `parse_block` and `apply_events`)."""
    events, note = parse_block(body)
    if events is None:
        return Outcome(state=NarrativeState.from_document(state).as_document(), note=note)
    return apply_events(state, events, forbidden=forbidden, seats=seats)


def apply_events(state: dict, events: list, *, forbidden: tuple[tuple[str, str], ...] = (),
                 seats: tuple[str, ...] = ()) -> Outcome:
    """Applies each valid event in order to the stored state `state`; refuses
    the others with their reason. `forbidden` holds the campaign's (from, to)
    status changes that may never happen (dead → alive); `seats` are the
    names of a shared story's seats, which move and item events may name
    with "seat" (their place and things are kept in the state's party)."""
    current = NarrativeState.from_document(state)
    applied: list[dict] = []
    refused: list[str] = []
    clamped: list[str] = []
    banned = {(a.strip().lower(), b.strip().lower()) for a, b in forbidden if a and b}
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            refused.append(f"event {index + 1} is not an object")
            continue
        kind = event.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            refused.append(f"event {index + 1} has an unknown type {json.dumps(kind)}")
            continue
        if kind in _SEAT_HANDLERS and "seat" in event:
            after, why = _SEAT_HANDLERS[kind](current, event, seats)
        else:
            after, why = handler(current, event, banned)
        if why:
            refused.append(f"{kind} event {index + 1}: {why}")
        else:
            clamped.extend(f"{kind} event {index + 1}: {what}" for what in _clamps(event, current, after))
            current = after
            applied.append(event)
    return Outcome(state=current.as_document(), applied=tuple(applied), refused=tuple(refused),
                   clamped=tuple(clamped))


def _clamps(event: dict, before: NarrativeState, after: NarrativeState) -> list[str]:
    """What applying `event` kept of it only in part."""
    cut = [f"{key} cut to {MAX_FIELD} characters" for key, value in event.items()
           if isinstance(value, str) and len(value.strip()) > MAX_FIELD]
    for name, old, new in (("entity", before.entities, after.entities), ("thread", before.threads, after.threads)):
        kept = {r.id for r in new}
        cut += [f"the {name} “{r.id}” was let go to make room (the least recently touched)" for r in old
                if r.id not in kept]
    return cut


def _text(value) -> str:
    return value.strip()[:MAX_FIELD] if isinstance(value, str) else ""


def _bad_id(key) -> str:
    if not isinstance(key, str) or not ID.match(key):
        return f"the id {json.dumps(key)} is not lowercase letters, digits, - or _"
    return ""


def _holder(state: NarrativeState, key) -> tuple[Entity | None, str]:
    """The known entity a move or item event names (None for the player
    character), or why it names nothing the state knows."""
    if key == PLAYER:
        return None, ""
    why = _bad_id(key)
    if why:
        return None, f'{why} (the player character is "{PLAYER}")'
    entity = state.entity(key)
    if entity is None:
        return None, f"“{key}” is not in the narrative state; introduce it with an entity event first"
    return entity, ""


def _scene(state: NarrativeState, event: dict, banned) -> tuple[NarrativeState, str]:
    summary, location = _text(event.get("summary")), _text(event.get("location"))
    if not (summary or location):
        return state, "it names neither a summary nor a location"
    scene = replace(state.scene, **{k: v for k, v in (("summary", summary), ("location", location)) if v})
    return replace(state, scene=scene), ""


def _entity(state: NarrativeState, event: dict, banned) -> tuple[NarrativeState, str]:
    key = event.get("id")
    if key == PLAYER:
        return state, f"“{PLAYER}” is the player character; use move and item events for them"
    why = _bad_id(key)
    if why:
        return state, why
    known = state.entity(key)
    name = _text(event.get("name"))
    if known is None and not name:
        return state, f"“{key}” is new and has no name"
    status = _text(event.get("status"))
    before = known.status.lower() if known else ""
    if known and status and (before, status.lower()) in banned:
        return state, f"“{known.label}” cannot go from {before} to {status.lower()} (campaign canon)"
    aliases = event.get("aliases")
    if aliases is not None and not (isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)):
        return state, "aliases must be a list of strings"
    entity = known or Entity(id=key)
    merged = [*entity.aliases, *(_text(a) for a in aliases or ())]
    entity = replace(
        entity,
        name=name or entity.name,
        status=status or entity.status,
        aliases=tuple(dict.fromkeys(a for a in merged if a))[:MAX_ALIASES],
    )
    return state.with_entity(entity), ""


def _thread(state: NarrativeState, event: dict, banned) -> tuple[NarrativeState, str]:
    key = event.get("id")
    why = _bad_id(key)
    if why:
        return state, why
    status = _text(event.get("status")).lower() or "open"
    if status not in THREAD_STATUSES:
        return state, f"the status {json.dumps(event.get('status'))} is not open or resolved"
    known = state.thread(key)
    title = _text(event.get("title"))
    if known is None and not title:
        return state, f"“{key}” is new and has no title"
    thread = known or Thread(id=key)
    return state.with_thread(replace(thread, title=title or thread.title, status=status)), ""


def _move(state: NarrativeState, event: dict, banned) -> tuple[NarrativeState, str]:
    """The player character moving is the scene's location changing."""
    entity, why = _holder(state, event.get("id"))
    if why:
        return state, why
    place = _text(event.get("to"))
    if not place:
        return state, "it names no place to go to"
    if entity is None:
        return replace(state, scene=replace(state.scene, location=place)), ""
    return state.with_entity(replace(entity, location=place)), ""


def _item(state: NarrativeState, event: dict, banned) -> tuple[NarrativeState, str]:
    entity, why = _holder(state, event.get("id"))
    if why:
        return state, why
    holder = "you" if entity is None else f"“{entity.label}”"
    items, why = _items_changed(state.inventory if entity is None else entity.items, event, holder, "hold", "held")
    if why:
        return state, why
    if entity is None:
        return replace(state, inventory=items), ""
    return state.with_entity(replace(entity, items=items)), ""


def _seat(state: NarrativeState, event: dict, seats: tuple[str, ...]) -> tuple[SeatState | None, str]:
    """The party seat an event names (new to the party if it is one of
    `seats`), or why it names none."""
    name = event.get("seat")
    if not isinstance(name, str) or not name.strip():
        return None, "its seat is not a name"
    known = state.seat(name)
    if known is not None:
        return known, ""
    seated = next((s for s in seats if seat_key(s) == seat_key(name)), None)
    if seated is None:
        present = ", ".join(seats) if seats else "none: this story has no seats"
        return None, f"“{name.strip()[:40]}” is not a seat at this table (the seats: {present})"
    return SeatState(name=seated), ""


def _seat_move(state: NarrativeState, event: dict, seats) -> tuple[NarrativeState, str]:
    seat, why = _seat(state, event, seats)
    if why:
        return state, why
    place = _text(event.get("to"))
    if not place:
        return state, "it names no place to go to"
    return state.with_seat(replace(seat, location=place)), ""


def _seat_item(state: NarrativeState, event: dict, seats) -> tuple[NarrativeState, str]:
    seat, why = _seat(state, event, seats)
    if why:
        return state, why
    items, why = _items_changed(seat.inventory, event, seat.name, "carry", "carried")
    if why:
        return state, why
    return state.with_seat(replace(seat, inventory=items)), ""


def _items_changed(items: tuple[str, ...], event: dict, holder: str, verb: str, held: str) -> tuple[tuple, str]:
    """`items` after an item event's gain or loss, or why it changes none
    (`verb` and `held` word the refusal: what an entity holds, a seat carries)."""
    item = _text(event.get("item"))
    if not item:
        return items, "it names no item"
    change = _text(event.get("change")).lower()
    if change not in GAINED + LOST:
        return items, f"the change {json.dumps(event.get('change'))} is not gained or lost"
    if change in LOST:
        if not holds(items, item):
            return items, f"“{item}” is not {held} by {holder}"
        return without(items, item), ""
    if not holds(items, item):
        if len(items) >= MAX_ITEMS:
            return items, f"{holder} cannot {verb} more than {MAX_ITEMS} items"
        return (*items, item), ""
    return items, ""


_SEAT_HANDLERS = {"move": _seat_move, "item": _seat_item}

_HANDLERS = {"scene": _scene, "move": _move, "entity": _entity, "item": _item, "thread": _thread}
