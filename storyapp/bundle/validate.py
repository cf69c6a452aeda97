"""Reading a bundle file and checking all of it before anything is written:
each refusal names the place (`actions[3].kind`) and says why."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import PurePath

from contextbuild.memories import MAX_CHARS as MAX_MEMORY_CHARS
from knowledge import services as knowledge
from knowledge.lorebooks import Entry, Lorebook, json_fault

from ..models import Action, Campaign, Membership, Memory
from . import FORMAT, VERSION, BundleError

KINDS = {choice.value for choice in Action.Kind}
CLASSES = {"canon", "reference", "inspiration"}
VISIBILITIES = {"visible", "hidden"}
LENGTHS = {choice.value for choice in Campaign.NarrationLength}
AUTHORITIES = {choice.value for choice in Memory.Authority}
#: The longest summary and memory texts a bundle may carry (a summary layer
#: is a few hundred words; a memory, contextbuild.memories.MAX_CHARS), and
#: the deepest layer of summaries of summaries.
MAX_SUMMARY_CHARS = 6000
MAX_SUMMARY_LEVEL = 64
ROLES = {choice.value for choice in Membership.Role}
#: A seat's name as Membership and Action keep it; its description, and the
#: most seats one table has (they all go into every prompt's cast).
MAX_SEAT_NAME = Membership._meta.get_field("seat_name").max_length
MAX_SEAT_DESCRIPTION = 2000
MAX_SEATS = 50


def parse(raw: bytes | str, *, name: str) -> dict:
    """The bundle file's JSON, or BundleError saying why it is not one
    (undecodable, not JSON, or nested too deep to read)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise BundleError(f"{name} is not a JSON document: it is not UTF-8 text ({exc.reason} at byte {exc.start}).") from exc
    except json.JSONDecodeError as exc:
        raise BundleError(f"{name} is not a JSON document ({json_fault(exc)}).") from exc
    except RecursionError as exc:
        raise BundleError(f"{name} is nested too deeply to be a campaign bundle.") from exc


@dataclass(frozen=True)
class _Action:
    ref: str
    parent: str | None
    kind: str
    text: str
    state: dict | None
    seat_name: str = ""


def validate(bundle) -> dict:
    """Checks the whole bundle and returns what import needs, or raises BundleError."""
    if not isinstance(bundle, dict):
        raise BundleError("The bundle should be a JSON object.")
    if bundle.get("format") != FORMAT:
        raise BundleError(f"This is not a Loremaster campaign bundle (format should be “{FORMAT}”).")
    version = _require(bundle, "version", int, "bundle")
    if version != VERSION:
        raise BundleError(f"Bundle version {version} is not supported; this server reads version {VERSION}.")
    campaign = _require(bundle, "campaign", dict, "bundle")
    title = _require(campaign, "title", str, "campaign")
    if not title.strip():
        raise BundleError("campaign.title is empty.")
    persona = _require(campaign, "persona", dict, "campaign", optional=True) or {}
    canon = _require(campaign, "canon", dict, "campaign", optional=True) or {}
    rules = _require(canon, "rules", list, "campaign.canon", optional=True) or []
    if not all(isinstance(rule, str) for rule in rules):
        raise BundleError("campaign.canon.rules should be a list of strings.")
    forbidden = _require(canon, "forbidden_status_changes", list, "campaign.canon", optional=True) or []
    for index, change in enumerate(forbidden):
        where = f"campaign.canon.forbidden_status_changes[{index}]"
        if not isinstance(change, dict):
            raise BundleError(f"{where} should be an object with “from” and “to”.")
        _require(change, "from", str, where)
        _require(change, "to", str, where)
    length = _text(campaign, "narration_length", "campaign")
    if length not in LENGTHS:
        raise BundleError(f"campaign.narration_length should be one of brief, medium, long or empty, not “{length}”.")
    state = _require(bundle, "narrative_state", dict, "bundle", optional=True) or {}

    actions = [_action(item, index) for index, item in enumerate(_require(bundle, "actions", list, "bundle"))]
    order = _tree_order(actions)
    head = _require(bundle, "head", str, "bundle", optional=True)
    if head is not None and head not in order:
        raise BundleError(f"head names the action “{head}”, which is not in the bundle.")
    if head is None and actions:
        raise BundleError("bundle.head is missing: a bundle with actions must say which one the story is read at.")

    sources = [_source(item, index) for index, item in enumerate(_require(bundle, "sources", list, "bundle", optional=True) or [])]
    snapshots = []
    for index, item in enumerate(_require(bundle, "snapshots", list, "bundle", optional=True) or []):
        where = f"snapshots[{index}]"
        _object(item, where)
        ref = _require(item, "action", str, where)
        if ref not in order:
            raise BundleError(f"{where}.action names “{ref}”, which is not in the bundle.")
        snapshots.append({
            "action": ref,
            "report": _require(item, "report", dict, where),
            "system": _text(item, "system", where),
            "story": _text(item, "story", where),
            "messages": _messages(item, where),
        })
    summaries = _summaries(bundle, order)
    memories = _memories(bundle, order, summaries)
    seats = _seats(bundle)
    return {
        "summaries": summaries,
        "memories": memories,
        "campaign": {
            "title": title.strip()[:200],
            "narrator_prompt": _text(campaign, "narrator_prompt", "campaign"),
            "ai_instructions": _text(campaign, "ai_instructions", "campaign"),
            "plot_essentials": _text(campaign, "plot_essentials", "campaign"),
            "authors_note": _text(campaign, "authors_note", "campaign"),
            "persona_name": _text(persona, "name", "campaign.persona")[:100],
            "persona_pronouns": _text(persona, "pronouns", "campaign.persona")[:50],
            "persona_description": _text(persona, "description", "campaign.persona"),
            "narration_length": length,
            "canon": {"rules": rules, "forbidden_status_changes": [{"from": c["from"], "to": c["to"]} for c in forbidden]},
            "initial_state": state,
            "imported_seats": seats,
        },
        "state": state,
        "actions": order,
        "head": head,
        "sources": sources,
        "snapshots": snapshots,
    }


def _messages(item: dict, where: str) -> list[dict]:
    """A snapshot's messages as sent: a list of {"role", "content"} strings;
    absent in bundles from before the prompt was a conversation."""
    messages = _require(item, "messages", list, where, optional=True) or []
    for index, message in enumerate(messages):
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)):
            raise BundleError(f"{where}.messages[{index}] must be an object with a string role and content.")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _require(mapping: dict, key: str, kind, where: str, *, optional: bool = False):
    if key not in mapping:
        if optional:
            return None
        raise BundleError(f"{where} is missing the required key “{key}”.")
    value = mapping[key]
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise BundleError(f"{where}.{key} should be {names}, not {type(value).__name__}.")
    return value


def _object(item, where: str) -> None:
    if not isinstance(item, dict):
        raise BundleError(f"{where} should be an object.")


def _text(mapping: dict, key: str, where: str) -> str:
    return _require(mapping, key, str, where, optional=True) or ""


def _action(item, index: int) -> _Action:
    where = f"actions[{index}]"
    _object(item, where)
    kind = _require(item, "kind", str, where)
    if kind not in KINDS:
        raise BundleError(f"{where}.kind should be player, ai or system, not “{kind}”.")
    return _Action(
        ref=_require(item, "id", str, where),
        parent=_require(item, "parent", str, where, optional=True),
        kind=kind,
        text=_require(item, "text", str, where),
        state=_require(item, "state", dict, where, optional=True),
        seat_name=_seat_name(item, "seat_name", where),
    )


def _seat_name(item: dict, key: str, where: str) -> str:
    """A seat's name: one line of text, no longer than a seat's name field."""
    name = " ".join(_text(item, key, where).split())
    if len(name) > MAX_SEAT_NAME:
        raise BundleError(f"{where}: a seat's name is at most {MAX_SEAT_NAME} characters.")
    return name


def _seats(bundle: dict) -> list[dict]:
    """The bundle's seats, as text (name, description, role): optional, and
    absent in bundles from before stories were shared."""
    seats: list[dict] = []
    items = _require(bundle, "seats", list, "bundle", optional=True) or []
    if len(items) > MAX_SEATS:
        raise BundleError(f"bundle.seats has {len(items)} seats; at most {MAX_SEATS} are accepted.")
    for index, item in enumerate(items):
        where = f"seats[{index}]"
        _object(item, where)
        name = _seat_name(item, "name", where)
        if not name:
            raise BundleError(f"{where}.name is empty.")
        if any(seat["name"] == name for seat in seats):
            raise BundleError(f"Two seats share the name “{name}”.")
        description = _text(item, "description", where).strip()
        if len(description) > MAX_SEAT_DESCRIPTION:
            raise BundleError(f"{where}.description is at most {MAX_SEAT_DESCRIPTION:,} characters.")
        role = _require(item, "role", str, where, optional=True) or Membership.Role.PLAYER
        if role not in ROLES:
            raise BundleError(f"{where}.role should be player or watcher, not “{role[:40]}”.")
        seats.append({"name": name, "description": description, "role": str(role)})
    return seats


def _tree_order(actions: list[_Action]) -> dict[str, _Action]:
    """The actions, parents before children; refuses duplicates, dangling parents and cycles."""
    by_ref: dict[str, _Action] = {}
    for action in actions:
        if action.ref in by_ref:
            raise BundleError(f"Two actions share the id “{action.ref}”.")
        by_ref[action.ref] = action
    children: dict[str | None, list[_Action]] = {}
    for action in actions:
        if action.parent is not None and action.parent not in by_ref:
            raise BundleError(f"Action “{action.ref}” names the parent “{action.parent}”, which is not in the bundle.")
        children.setdefault(action.parent, []).append(action)
    order: dict[str, _Action] = {}
    queue = deque(children.get(None, []))
    while queue:
        action = queue.popleft()
        order[action.ref] = action
        queue.extend(children.get(action.ref, []))
    if len(order) != len(by_ref):
        stuck = sorted(set(by_ref) - set(order))[:5]
        raise BundleError(f"The actions {', '.join(stuck)} form a cycle: following their parents never reaches a root.")
    return order


def _ancestors(order: dict[str, _Action], ref: str):
    """The refs above `ref`, nearest first (the tree is already checked acyclic)."""
    parent = order[ref].parent
    while parent is not None:
        yield parent
        parent = order[parent].parent


def _summaries(bundle: dict, order: dict[str, _Action]) -> dict[str, dict]:
    """The bundle's summaries by id. A summary covers the lineage after
    `starts_after` through `covers_through`, so the start must be an
    ancestor of the end: otherwise no lineage holds the stretch."""
    found: dict[str, dict] = {}
    for index, item in enumerate(_require(bundle, "summaries", list, "bundle", optional=True) or []):
        where = f"summaries[{index}]"
        _object(item, where)
        ref = _require(item, "id", str, where)
        if ref in found:
            raise BundleError(f"Two summaries share the id “{ref}”.")
        through = _require(item, "covers_through", str, where)
        if through not in order:
            raise BundleError(f"{where}.covers_through names “{through}”, which is not in the bundle.")
        start = _require(item, "starts_after", str, where, optional=True)
        if start is not None and start not in _ancestors(order, through):
            raise BundleError(f"{where}.starts_after names “{start}”, which is not an action before “{through}”.")
        level = _require(item, "level", int, where, optional=True) or 0
        if not 0 <= level <= MAX_SUMMARY_LEVEL:
            raise BundleError(f"{where}.level should be from 0 to {MAX_SUMMARY_LEVEL}.")
        text = _bounded_text(item, where, MAX_SUMMARY_CHARS)
        found[ref] = {"starts_after": start, "covers_through": through, "level": level, "text": text}
    return found


def _memories(bundle: dict, order: dict[str, _Action], summaries: dict[str, dict]) -> list[dict]:
    memories = []
    for index, item in enumerate(_require(bundle, "memories", list, "bundle", optional=True) or []):
        where = f"memories[{index}]"
        _object(item, where)
        anchor = _require(item, "anchor", str, where)
        if anchor not in order:
            raise BundleError(f"{where}.anchor names “{anchor}”, which is not in the bundle.")
        authority = _require(item, "authority", str, where)
        if authority not in AUTHORITIES:
            raise BundleError(f"{where}.authority should be recorded or inferred, not “{authority}”.")
        summary = _require(item, "summary", str, where, optional=True)
        if summary is not None and summary not in summaries:
            raise BundleError(f"{where}.summary names “{summary}”, which is not in the bundle.")
        text = _bounded_text(item, where, MAX_MEMORY_CHARS)
        memories.append({"anchor": anchor, "authority": authority, "summary": summary, "text": text})
    return memories


def _bounded_text(item: dict, where: str, limit: int) -> str:
    """A summary's or memory's text: not empty, and no longer than the worker
    would have written it, because it is recalled into prompts unabridged."""
    text = _require(item, "text", str, where)
    if not text.strip():
        raise BundleError(f"{where}.text is empty.")
    if len(text) > limit:
        raise BundleError(f"{where}.text is {len(text):,} characters; at most {limit:,} are accepted.")
    return text


def _book(item: dict, where: str) -> tuple[Lorebook | None, dict, dict[int, str]]:
    """The source's `lorebook`, checked, as the record the library stores,
    the metadata its file kept, and the seat each secret entry is known to
    (by the entry's place in the book; a lorebook record has no seats)."""
    raw = _require(item, "lorebook", dict, where, optional=True)
    if raw is None:
        return None, {}, {}
    where = f"{where}.lorebook"
    format_name = _require(raw, "format", str, where)
    if not format_name.strip():
        raise BundleError(f"{where}.format should name the lorebook's format.")
    metadata = _require(raw, "metadata", dict, where, optional=True) or {}
    entries = []
    secrets = {}
    for number, entry in enumerate(_require(raw, "entries", list, where)):
        at = f"{where}.entries[{number}]"
        _object(entry, at)
        if seat := _seat_name(entry, "secret_seat", at):
            secrets[number] = seat
        lists = {}
        for name in ("keys", "secondary_keys", "regex_keys"):
            values = _require(entry, name, list, at, optional=True) or []
            if not all(isinstance(v, str) for v in values):
                raise BundleError(f"{at}.{name} should be a list of strings.")
            lists[name] = tuple(values)
        entries.append(Entry(
            title=_text(entry, "title", at), text=_text(entry, "text", at), **lists,
            enabled=_require(entry, "enabled", bool, at, optional=True) is not False,
            constant=bool(_require(entry, "constant", bool, at, optional=True)),
            extras=_require(entry, "extras", dict, at, optional=True) or {},
        ))
    book = Lorebook(format=format_name, name=str(metadata.get("name") or ""), entries=tuple(entries))
    return book, metadata, secrets


def _source(item, index: int) -> dict:
    where = f"sources[{index}]"
    _object(item, where)
    classification = _require(item, "classification", str, where)
    if classification not in CLASSES:
        raise BundleError(f"{where}.classification should be canon, reference or inspiration.")
    visibility = _require(item, "visibility", str, where, optional=True) or "visible"
    if visibility not in VISIBILITIES:
        raise BundleError(f"{where}.visibility should be visible or hidden.")
    always = bool(_require(item, "always_include", bool, where, optional=True))
    try:
        knowledge.source_always_include_check(classification=classification, always_include=always)
    except knowledge.ImportRefused as exc:
        raise BundleError(f"{where}: {exc}") from exc
    # A path in the name is dropped, and the text goes through the library
    # upload's checks (type, size, binary data), so a bundle cannot bring in
    # what an upload could not.
    filename = PurePath(_require(item, "filename", str, where).replace("\\", "/")).name
    text = _require(item, "text", str, where)
    book, metadata, entry_secrets = _book(item, where)
    if book is None:
        try:
            text = knowledge.source_text_from_upload(filename=filename, data=text.encode("utf-8"))
        except knowledge.ImportRefused as exc:
            raise BundleError(f"{where}: {exc}") from exc
    return {
        "title": _text(item, "title", where),
        "filename": filename,
        "classification": classification,
        "visibility": visibility,
        "always_include": always,
        "enabled": _require(item, "enabled", bool, where, optional=True) is not False,
        "secret_seat": _text(item, "secret_seat", where),
        "text": text,
        "book": book,
        "metadata": metadata,
        "entry_secrets": entry_secrets,
    }
