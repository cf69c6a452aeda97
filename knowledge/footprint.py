"""What a source's lore takes in the database, in bytes: pure arithmetic.

The lore-size limits (quotas.lore) are on what is stored, not on what was
uploaded, because the two part ways: a 5 MB file of one-line sections once
took 97.5 MB, a 5 MB World Info file of 100,000 bare entries 147 MB (issue
23). Each row is counted as its columns' bytes plus ROW_BYTES for its
header, ids and index entries (about what PostgreSQL took a passage
beyond its text in those measurements), and a passage's text twice: once
in its row and once in the lexical index.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

ROW_BYTES = 200
FLOAT_BYTES = 4


def text_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def passage_bytes(heading_path: str, text: str) -> int:
    return ROW_BYTES + 2 * (text_bytes(heading_path) + text_bytes(text))


def entry_bytes(title: str, text: str, *json_fields) -> int:
    """An entry row: its title and text, and its keys and extras as JSON."""
    fields = sum(len(json.dumps(value, ensure_ascii=False).encode()) for value in json_fields)
    return ROW_BYTES + text_bytes(title) + text_bytes(text) + fields


def vector_bytes(dimensions: int) -> int:
    return ROW_BYTES + FLOAT_BYTES * dimensions


def source_bytes(*, content: str, entries: Iterable[int], passages: Iterable[int], vectors: Iterable[int]) -> int:
    """The whole source: its row with its text, and its entries', passages'
    and vectors' sizes as the functions above give them."""
    return ROW_BYTES + text_bytes(content) + sum(entries) + sum(passages) + sum(vectors)
