"""Lorebooks, world info and character cards from other tools (issue 14).

`entries` holds the records every importer produces; one module per format
reads into them; `detect.read` picks the format by content, never by the
file name alone.
"""

from .detect import read
from .entries import CharacterCard, Entry, Lorebook, LorebookError, is_regex_key, key_line, split_keys
from .jsonfault import json_fault, unreadable

__all__ = ["CharacterCard", "Entry", "Lorebook", "LorebookError", "is_regex_key", "json_fault", "key_line", "read",
           "split_keys", "unreadable"]
