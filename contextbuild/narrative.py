"""The narrative state as one record: what is true in the story right now.

The state is stored as a JSON document on every action (and as the
campaign's opening state), and it is written by the narrator's state block,
by a reader's hand correction and by bundle imports. Everything that reads
it (the prompt's rendering, the retrieval query, the apply code, the play
page's form) goes through `NarrativeState.read`, so a malformed document is
handled one way everywhere: shapes are checked, never assumed, and sizes are
capped, because the state is in every prompt.

The document keeps the shape older states were stored in, and leaves out
what is empty, so a state that never used locations or items reads back
exactly as it was written:

    {"scene": {"summary": "...", "location": "..."},
     "entities": {"id": {"name": "...", "status": "...", "aliases": [...],
                         "location": "...", "items": [...]}},
     "threads": {"id": {"title": "...", "status": "open"}},
     "inventory": ["..."],
     "party": {"Mara": {"location": "...", "inventory": ["..."]}}}

The player character is not an entity: where they are is the scene's
location, and what they carry is the inventory. Events and forms name them
with the reserved id `you`. In a shared story each player's seat is kept
under its seat's name in `party` (events name it with "seat"), and `you`
stays the game master's character, or the group as a whole.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace

#: Entity and thread ids, as the state rule asks for them: lowercase letters,
#: digits, underscores and hyphens.
ID = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
#: The id events use for the player character.
PLAYER = "you"
THREAD_STATUSES = ("open", "resolved")
#: Longest text kept from any one field: a runaway model must not grow the
#: state without bound.
MAX_FIELD = 300
MAX_ENTITIES = 60
MAX_THREADS = 40
MAX_ALIASES = 12
#: Items carried by the player character, or held by any one entity.
MAX_ITEMS = 30
#: Seats kept in a shared story's party, and the longest seat name
#: (Membership.seat_name's).
MAX_SEATS = 12
MAX_SEAT_NAME = 100


@dataclass(frozen=True)
class Scene:
    summary: str = ""
    location: str = ""


@dataclass(frozen=True)
class Entity:
    """A character, creature, object or faction. `location` is where it is
    when that is not simply the scene; `items` is what it holds."""

    id: str
    name: str = ""
    status: str = ""
    aliases: tuple[str, ...] = ()
    location: str = ""
    items: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.name or self.id

    def as_record(self) -> dict:
        return _compact({
            "name": self.name, "status": self.status, "aliases": list(self.aliases),
            "location": self.location, "items": list(self.items),
        })


@dataclass(frozen=True)
class Thread:
    id: str
    title: str = ""
    status: str = "open"

    @property
    def is_open(self) -> bool:
        return self.status == "open"

    def as_record(self) -> dict:
        return {**_compact({"title": self.title}), "status": self.status}


@dataclass(frozen=True)
class SeatState:
    """Where one player's character is and what they carry, by seat name."""

    name: str
    location: str = ""
    inventory: tuple[str, ...] = ()

    def as_record(self) -> dict:
        return _compact({"location": self.location, "inventory": list(self.inventory)})


@dataclass(frozen=True)
class NarrativeState:
    scene: Scene = field(default_factory=Scene)
    entities: tuple[Entity, ...] = ()
    threads: tuple[Thread, ...] = ()
    inventory: tuple[str, ...] = ()
    party: tuple[SeatState, ...] = ()

    @classmethod
    def from_document(cls, doc) -> NarrativeState:
        """The state a stored document describes, whatever its shape."""
        return cls.read(doc)[0]

    @classmethod
    def read(cls, doc) -> tuple[NarrativeState, tuple[str, ...]]:
        """The state, and what in the document had to be dropped, cut or
        guessed. Stored states only need the first; a reader's hand
        correction is refused while the second is not empty."""
        problems: list[str] = []
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            return cls(), ("The state is not a JSON object.",)
        state = cls(
            scene=_read_scene(doc.get("scene"), problems),
            entities=_read_table(doc.get("entities"), "entities", _read_entity, MAX_ENTITIES, problems),
            threads=_read_table(doc.get("threads"), "threads", _read_thread, MAX_THREADS, problems),
            inventory=_read_items(doc.get("inventory"), "What you carry", problems),
            party=_read_party(doc.get("party"), problems),
        )
        return state, tuple(problems)

    def as_document(self) -> dict:
        """The JSON document this state is stored as, empty parts left out."""
        doc: dict = {}
        scene = _compact({"summary": self.scene.summary, "location": self.scene.location})
        if scene:
            doc["scene"] = scene
        if self.entities:
            doc["entities"] = {e.id: e.as_record() for e in self.entities}
        if self.threads:
            doc["threads"] = {t.id: t.as_record() for t in self.threads}
        if self.inventory:
            doc["inventory"] = list(self.inventory)
        if self.party:
            doc["party"] = {seat.name: seat.as_record() for seat in self.party}
        return doc

    def fingerprint(self) -> str:
        """A short digest of the document: a form shown before the state
        moved on can tell that it did."""
        text = json.dumps(self.as_document(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def entity(self, key: str) -> Entity | None:
        return next((e for e in self.entities if e.id == key), None)

    def thread(self, key: str) -> Thread | None:
        return next((t for t in self.threads if t.id == key), None)

    def seat(self, name: str) -> SeatState | None:
        """The party's seat of that name (as `seat_key` compares names)."""
        return next((s for s in self.party if seat_key(s.name) == seat_key(name)), None)

    def with_seat(self, seat: SeatState) -> NarrativeState:
        """This state with `seat` in its party, in place if it was there."""
        kept = [s for s in self.party if seat_key(s.name) != seat_key(seat.name)]
        if len(kept) == len(self.party):
            return replace(self, party=(*kept, seat)[-MAX_SEATS:])
        return replace(self, party=tuple(seat if seat_key(s.name) == seat_key(seat.name) else s for s in self.party))

    def with_entity(self, entity: Entity) -> NarrativeState:
        """This state with `entity` last, as the most recently touched.

        Past MAX_ENTITIES the least recently touched one is let go rather
        than the new one refused: a long story keeps meeting people, and
        what it established about the forgotten ones is in its memories.
        """
        return replace(self, entities=_put(self.entities, entity, MAX_ENTITIES))

    def with_thread(self, thread: Thread) -> NarrativeState:
        """Likewise for threads; a resolved one is let go before an open one."""
        return replace(self, threads=_put(self.threads, thread, MAX_THREADS))


def seat_key(name: str) -> str:
    """How two spellings of one seat's name compare: "mara" is "Mara"."""
    return " ".join(name.split()).casefold()


def item_key(item: str) -> str:
    """How two names of one item compare: "The brass key" is "a brass key"."""
    return re.sub(r"^(?:a|an|the|some|your|my)\s+", "", " ".join(item.lower().split()))


def holds(items: tuple[str, ...], item: str) -> bool:
    return any(item_key(i) == item_key(item) for i in items)


def without(items: tuple[str, ...], item: str) -> tuple[str, ...]:
    return tuple(i for i in items if item_key(i) != item_key(item))


def _put(records: tuple, record, limit: int) -> tuple:
    """`records` with `record` moved (or added) last, in recency order, and
    the least recent let go past `limit` (closed threads first)."""
    kept = [r for r in records if r.id != record.id]
    while len(kept) >= limit:
        closed = next((r for r in kept if getattr(r, "is_open", True) is False), None)
        kept.remove(closed or kept[0])
    return (*kept, record)


def _compact(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if v}


def _text(value, where: str, problems: list[str]) -> str:
    """A stripped string field; anything else is empty, and too long is cut."""
    if value is None:
        return ""
    if not isinstance(value, str):
        problems.append(f"{where} is not text.")
        return ""
    text = value.strip()
    if len(text) > MAX_FIELD:
        problems.append(f"{where} is longer than {MAX_FIELD} characters.")
    return text[:MAX_FIELD]


def _read_scene(value, problems: list[str]) -> Scene:
    if not isinstance(value, dict):
        if value is not None:
            problems.append("The scene is not an object.")
        return Scene()
    return Scene(
        summary=_text(value.get("summary"), "The scene summary", problems),
        location=_text(value.get("location"), "The location", problems),
    )


def _read_table(value, name: str, read_one, limit: int, problems: list[str]) -> tuple:
    """The records of an id → object table, in the document's order."""
    if not isinstance(value, dict):
        if value is not None:
            problems.append(f"The {name} are not an object of ids.")
        return ()
    records = []
    for key, record in value.items():
        key = key.strip() if isinstance(key, str) else ""
        if not ID.match(key):
            problems.append(f"“{key[:40]}” is not an id: use lowercase letters, digits, - or _, starting with a letter.")
            if not key:
                continue
        records.append(read_one(key[:64], record if isinstance(record, dict) else {}, problems))
    if len(records) > limit:
        # Stored in recency order: the newest are the ones to keep.
        problems.append(f"Only the {limit} most recent {name} are kept.")
    return tuple(records[-limit:])


def _read_entity(key: str, record: dict, problems: list[str]) -> Entity:
    where = f"“{key}”"
    if key == PLAYER:
        problems.append(f"{where} is the player character, not a character or thing: use the location and what you carry.")
    name = _text(record.get("name"), f"The name of {where}", problems)
    if not name:
        problems.append(f"{where} has no name.")
    return Entity(
        id=key,
        name=name,
        status=_text(record.get("status"), f"The status of {where}", problems),
        aliases=_read_list(record.get("aliases"), f"The aliases of {where}", MAX_ALIASES, str.lower, problems),
        location=_text(record.get("location"), f"The location of {where}", problems),
        items=_read_items(record.get("items"), f"What {where} holds", problems),
    )


def _read_thread(key: str, record: dict, problems: list[str]) -> Thread:
    where = f"“{key}”"
    title = _text(record.get("title"), f"The title of thread {where}", problems)
    if not title:
        problems.append(f"Thread {where} has no title.")
    status = _text(record.get("status"), f"The status of thread {where}", problems).lower() or "open"
    if status not in THREAD_STATUSES:
        problems.append(f"Thread {where} is “{status}”: a thread is open or resolved.")
        # Whatever else a stored thread says ("abandoned", "done"), it no
        # longer steers the story.
        status = "resolved"
    return Thread(id=key, title=title, status=status)


def _read_party(value, problems: list[str]) -> tuple[SeatState, ...]:
    """The party's seats, by name, in the document's order."""
    if not isinstance(value, dict):
        if value is not None:
            problems.append("The party is not an object of seat names.")
        return ()
    seats: dict[str, SeatState] = {}
    for name, record in value.items():
        name = " ".join(name.split()) if isinstance(name, str) else ""
        if not name:
            problems.append("A seat in the party has no name.")
            continue
        if len(name) > MAX_SEAT_NAME:
            problems.append(f"The seat name “{name[:40]}…” is longer than {MAX_SEAT_NAME} characters.")
            name = name[:MAX_SEAT_NAME]
        if seat_key(name) in seats:
            problems.append(f"The seat “{name}” is in the party twice.")
            continue
        if not isinstance(record, dict):
            problems.append(f"The seat “{name}” is not an object.")
            record = {}
        seats[seat_key(name)] = SeatState(
            name=name,
            location=_text(record.get("location"), f"Where “{name}” is", problems),
            inventory=_read_items(record.get("inventory"), f"What “{name}” carries", problems),
        )
    if len(seats) > MAX_SEATS:
        problems.append(f"Only {MAX_SEATS} seats are kept in the party.")
    return tuple(seats.values())[:MAX_SEATS]


def _read_items(value, where: str, problems: list[str]) -> tuple[str, ...]:
    return _read_list(value, where, MAX_ITEMS, item_key, problems)


def _read_list(value, where: str, limit: int, key, problems: list[str]) -> tuple[str, ...]:
    """A list of short texts, without repeats (as `key` compares them)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{where} is not a list.")
        return ()
    kept: dict[str, str] = {}
    for entry in value:
        text = _text(entry, where, problems)
        if text:
            kept.setdefault(key(text), text)
    if len(kept) > limit:
        problems.append(f"{where}: only {limit} are kept.")
    return tuple(kept.values())[:limit]
