"""Query parameters and headers the pages read as numbers."""

from __future__ import annotations

import re

from django.core.exceptions import BadRequest

#: Ids and offsets are small numbers; anything longer is not one of ours.
NUMBER_PARAM = re.compile(r"[0-9]{1,12}")


def number_param(value: str | None, *, default: int = 0) -> int:
    """A query parameter or header that must be a plain number: a 400 otherwise, not a 500."""
    if value is None or value == "":
        return default
    if not NUMBER_PARAM.fullmatch(value):
        raise BadRequest("Expected a number.")
    return int(value)
