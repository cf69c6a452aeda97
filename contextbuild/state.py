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

import copy
import json
import re
from dataclasses import dataclass

#: Entity and thread ids, as the rule asks for them: lowercase letters,
#: digits, underscores and hyphens.
_ID = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
THREAD_STATUSES = ("open", "resolved")
#: Longest text kept from any one field: a runaway model must not grow the
#: state (which is in every prompt) without bound.
MAX_FIELD = 300


@dataclass(frozen=True)
class Outcome:
    """The state after the block, what was applied, what was refused and why,
    and a note when the block itself could not be read."""

    state: dict
    applied: tuple[dict, ...] = ()
    refused: tuple[str, ...] = ()
    note: str = ""

    def as_record(self) -> dict:
        """This turn's state events, as the snapshot's report stores them."""
        return {"applied": [dict(e) for e in self.applied], "refused": list(self.refused), "note": self.note}


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


def apply_block(state: dict, body: str | None, *, forbidden: tuple[tuple[str, str], ...] = ()) -> Outcome:
    """The state after the reply's block (see `parse_block` and `apply_events`)."""
    events, note = parse_block(body)
    if events is None:
        return Outcome(state=copy.deepcopy(state), note=note)
    return apply_events(state, events, forbidden=forbidden)


def apply_events(state: dict, events: list, *, forbidden: tuple[tuple[str, str], ...] = ()) -> Outcome:
    """Applies each valid event in order to a copy of `state`; refuses the
    others with their reason. `forbidden` holds the campaign's (from, to)
    status changes that may never happen (dead → alive)."""
    new = copy.deepcopy(state) if isinstance(state, dict) else {}
    applied: list[dict] = []
    refused: list[str] = []
    banned = {(a.strip().lower(), b.strip().lower()) for a, b in forbidden if a and b}
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            refused.append(f"event {index + 1} is not an object")
            continue
        kind = event.get("type")
        handler = _HANDLERS.get(kind)
        if handler is None:
            refused.append(f"event {index + 1} has an unknown type {json.dumps(kind)}")
            continue
        why = handler(new, event, banned)
        if why:
            refused.append(f"{kind} event {index + 1}: {why}")
        else:
            applied.append(event)
    return Outcome(state=new, applied=tuple(applied), refused=tuple(refused))


def _text(value) -> str:
    return value.strip()[:MAX_FIELD] if isinstance(value, str) else ""


def _scene(state: dict, event: dict, banned) -> str:
    summary, location = _text(event.get("summary")), _text(event.get("location"))
    if not (summary or location):
        return "it names neither a summary nor a location"
    scene = state.get("scene") if isinstance(state.get("scene"), dict) else {}
    if summary:
        scene["summary"] = summary
    if location:
        scene["location"] = location
    state["scene"] = scene
    return ""


def _lookup(state: dict, table: str, key) -> tuple[str, dict, dict | None]:
    """(why the id is refused or "", the state's table, the known record)."""
    if not isinstance(key, str) or not _ID.match(key):
        return f"the id {json.dumps(key)} is not lowercase letters, digits, - or _", {}, None
    records = state.get(table) if isinstance(state.get(table), dict) else {}
    known = records.get(key) if isinstance(records.get(key), dict) else None
    return "", records, known


def _entity(state: dict, event: dict, banned) -> str:
    key = event.get("id")
    why, entities, known = _lookup(state, "entities", key)
    if why:
        return why
    name = _text(event.get("name"))
    if known is None and not name:
        return f"“{key}” is new and has no name"
    status = _text(event.get("status"))
    before = _text(known.get("status")).lower() if known else ""
    if known and status and (before, status.lower()) in banned:
        return f"“{known.get('name') or key}” cannot go from {before} to {status.lower()} (campaign canon)"
    aliases = event.get("aliases")
    if aliases is not None and not (isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)):
        return "aliases must be a list of strings"
    entity = dict(known or {})
    if name:
        entity["name"] = name
    if status:
        entity["status"] = status
    if aliases:
        merged = [*entity.get("aliases", []), *(_text(a) for a in aliases)]
        entity["aliases"] = list(dict.fromkeys(a for a in merged if a))[:12]
    entities[key] = entity
    state["entities"] = entities
    return ""


def _thread(state: dict, event: dict, banned) -> str:
    key = event.get("id")
    why, threads, known = _lookup(state, "threads", key)
    if why:
        return why
    status = _text(event.get("status")).lower() or "open"
    if status not in THREAD_STATUSES:
        return f"the status {json.dumps(event.get('status'))} is not open or resolved"
    title = _text(event.get("title"))
    if known is None and not title:
        return f"“{key}” is new and has no title"
    thread = dict(known or {})
    if title:
        thread["title"] = title
    thread["status"] = status
    threads[key] = thread
    state["threads"] = threads
    return ""


_HANDLERS = {"scene": _scene, "entity": _entity, "thread": _thread}
