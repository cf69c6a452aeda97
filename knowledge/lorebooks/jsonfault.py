"""Where a JSON document breaks, said once.

Python's decoder ends some of its messages with the place's preposition
("Unterminated string starting at", "Invalid control character at"), so a
message that adds "at line 31" of its own read "starting at at line 31".
"""

from __future__ import annotations

import json


def json_fault(exc: json.JSONDecodeError) -> str:
    """The decoder's reason and the place, as a clause for a reader:
    "Unterminated string starting at line 31, column 5"."""
    return f"{exc.msg.removesuffix(' at')} at line {exc.lineno}, column {exc.colno}"
