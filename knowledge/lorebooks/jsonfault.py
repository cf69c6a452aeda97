"""Where a JSON document breaks, said once, and the same everywhere.

Python's decoder ends some of its messages with the place's preposition
("Unterminated string starting at", "Invalid control character at"), so a
message that adds "at line 31" of its own read "starting at at line 31".

A file no reader took is described by `unreadable`, the one clause the
library and the campaign-from-card page both say: a truncated download
read "neither a PNG image nor JSON" on one page and "not valid JSON (…
line 56, column 28)" on the other.
"""

from __future__ import annotations

import json

#: What a JSON document opens with (after any whitespace).
_JSON_OPENINGS = ("{", "[")


def json_fault(exc: json.JSONDecodeError) -> str:
    """The decoder's reason and the place, as a clause for a reader:
    "Unterminated string starting at line 31, column 5"."""
    return f"{exc.msg.removesuffix(' at')} at line {exc.lineno}, column {exc.colno}"


def unreadable(data: bytes, *, name: str) -> str:
    """Why a file `detect.read` did not read (neither a PNG nor JSON text)
    is no lorebook or card, as a clause for a reader. A file that opens as
    JSON, or is named `.json`, is JSON that breaks somewhere: the fault and
    its place are what the reader needs to mend it."""
    lowered = name.lower()
    try:
        text = data.decode("utf-8-sig")
        json.loads(text)
    except UnicodeDecodeError:
        pass
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith(_JSON_OPENINGS) or lowered.endswith(".json"):
            return f"the file is not valid JSON ({json_fault(exc)})"
    if lowered.endswith(".png"):
        return "the file is not a PNG image (a character card is a PNG with the card inside, or JSON)"
    return "the file is neither a PNG image nor JSON"
