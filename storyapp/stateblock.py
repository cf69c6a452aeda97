"""Separating the narrator's prose from the state block it appends.

The narrator ends each turn with `<state>...</state>`. The reader must never
see it, not even while the reply streams in, so the visible part is cut at the
opening marker, and a reply ending in a fragment of the marker ("<sta") holds
that fragment back until the next chunk settles what it is.
"""

from __future__ import annotations

OPEN = "<state>"
CLOSE = "</state>"


def visible_prose(raw: str) -> str:
    """What may be shown of a reply that may still be arriving."""
    cut = raw.find(OPEN)
    if cut >= 0:
        return raw[:cut]
    for size in range(min(len(OPEN) - 1, len(raw)), 0, -1):
        if OPEN.startswith(raw[-size:]):
            return raw[:-size]
    return raw


def split(raw: str) -> tuple[str, str | None]:
    """(prose, state block body or None) of a finished reply."""
    cut = raw.find(OPEN)
    if cut < 0:
        return raw.strip(), None
    body = raw[cut + len(OPEN):]
    end = body.find(CLOSE)
    if end >= 0:
        body = body[:end]
    return raw[:cut].strip(), body.strip()
