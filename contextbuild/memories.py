"""Recorded memories: the facts a narration's accepted state events establish.

The state holds what is true now; a memory holds what happened, so a later
turn can be reminded that the harbourmaster died at the quay even when the
state has long moved on. These are made from accepted events only, so they
carry the authority of the narrative state (`recorded`); what a model reads
into the story is a summary's fact instead, marked `inferred`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .narrative import PLAYER
from .records import INFERRED, Memory
from .state import LOST
from .tokens import count_tokens, truncate_to_last_tokens

#: The longest memory kept; a memory is retrieved into prompts.
MAX_CHARS = 300


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def _key(event: dict) -> str:
    key = event.get("id")
    return key if isinstance(key, str) else ""


def _name(state: dict, key: str, protagonist: str) -> str:
    if key in ("", PLAYER):
        return protagonist or "The protagonist"
    entities = state.get("entities") if isinstance(state, dict) else None
    entity = entities.get(key) if isinstance(entities, dict) else None
    name = _text(entity.get("name")) if isinstance(entity, dict) else ""
    return name or str(key).replace("_", " ").replace("-", " ")


def _sentence(text: str) -> str:
    text = text.strip()
    if text and text[-1] not in ".!?":
        text += "."
    return text[:MAX_CHARS]


def describe(event: dict, state: dict, *, protagonist: str = "") -> str:
    """One accepted event as a plain sentence, or "" for one not worth
    remembering on its own (a bare rename)."""
    kind = event.get("type")
    if kind == "scene":
        summary, location = _text(event.get("summary")), _text(event.get("location"))
        if summary and location:
            return _sentence(f"{summary.rstrip('.')} ({location})")
        return _sentence(summary or f"The scene moved to {location}")
    if kind == "entity":
        name = _name(state, _key(event), protagonist)
        status = _text(event.get("status"))
        return _sentence(f"{name}: {status}") if status else ""
    if kind == "thread":
        threads = state.get("threads") if isinstance(state, dict) else None
        known = threads.get(_key(event)) if isinstance(threads, dict) else None
        title = _text(event.get("title")) or (_text(known.get("title")) if isinstance(known, dict) else "")
        if not title:
            return ""
        if _text(event.get("status")).lower() == "resolved":
            return _sentence(f"Resolved: {title}")
        return _sentence(f"Begun: {title}")
    # Move and item events are read by exactly the fields contextbuild.state
    # applied them by, so a memory never says what the state does not.
    if kind == "move":
        who = _name(state, _key(event), protagonist)
        place = _text(event.get("to"))
        return _sentence(f"{who} went to {place}") if place else ""
    if kind == "item":
        who = _name(state, _key(event), protagonist)
        item = _text(event.get("item"))
        verb = "lost" if _text(event.get("change")).lower() in LOST else "gained"
        return _sentence(f"{who} {verb} {item}") if item else ""
    return ""


def recorded(events: Sequence[dict], state: dict, *, protagonist: str = "") -> tuple[str, ...]:
    """The distinct sentences of a narration's accepted events, in order."""
    texts = (describe(e, state, protagonist=protagonist) for e in events if isinstance(e, dict))
    return tuple(dict.fromkeys(t for t in texts if t))


MEMORIES_HEADING = (
    "Memories from earlier in the story. Lines marked [inferred] are "
    "interpretation, not established fact — do not treat them as settled truth:"
)


def memories_within(memories: tuple[Memory, ...], limit: int) -> tuple[Memory, ...]:
    """The best-ranked memories whose lines fit in `limit` tokens (at least
    the first, cut if it alone is too long): memories are never dropped for
    history, so they are bounded here instead."""
    kept: list[Memory] = []
    used = count_tokens(MEMORIES_HEADING)
    for memory in memories:
        if not memory.text.strip():
            continue
        cost = count_tokens(memory.text) + 4
        if used + cost > limit:
            if not kept:
                kept.append(replace(memory, text=truncate_to_last_tokens(memory.text, max(1, limit - used - 4))))
            break
        kept.append(memory)
        used += cost
    return tuple(kept)


def memories_text(memories: tuple[Memory, ...]) -> str:
    """Retrieved memories, inferred ones marked as such.

    The narrator decides what is established from what it is shown, and an
    unlabelled guess beside the recorded story is how a guess becomes canon.
    """
    lines = [
        f"- [inferred] {m.text.strip()}" if m.authority == INFERRED else f"- {m.text.strip()}"
        for m in memories
        if m.text.strip()
    ]
    return f"{MEMORIES_HEADING}\n" + "\n".join(lines) if lines else ""


