"""How many regex keys a book and a campaign may hold, and which keys may be
compiled at all, checked where a book is stored and where an entry is
edited (issue 23).

Every regex key is compiled on the server for its campaign's turns
(knowledge.regexkeys), so a book of thousands of them, or of one that
unrolls into millions of copies, costs every turn or the worker's memory.
The limits are the environment's (LOREMASTER_REGEX_KEYS_PER_BOOK,
LOREMASTER_REGEX_KEYS_PER_CAMPAIGN) and the unrolled size of
knowledge.regexkeys; a turn applies the same ones to rows stored before
them.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db.models import Q

from .. import regexkeys
from ..lorebooks import is_regex_key
from ..models import LoreEntry
from .reading import ImportRefused


def regex_keys_of(entry) -> list[str]:
    """The entry's keys that compile as patterns: its regex keys and the
    secondary keys written `/…/`. Entries are LoreEntry rows or lorebook
    Entry records."""
    return [*entry.regex_keys, *(k for k in entry.secondary_keys if is_regex_key(str(k)))]


def regex_keys_check(*, campaign_id: int, name: str, entries: Iterable, replacing=None) -> None:
    """Raises ImportRefused, naming the book and the key, when `entries`
    (the book as it would be stored) hold a key that would unroll too far
    when compiled, more regex keys than a book may, or would take the
    campaign past its regex keys or their unrolled size. `replacing` is the
    source the entries belong to already (an edit): its stored keys are
    not counted twice.

    1. Each key is judged from its text (nothing is compiled).
    2. The book's count against the per-book limit.
    3. The campaign's other books' count and size, with this one's.
    """
    book = []
    for entry in entries:
        for key in regex_keys_of(entry):
            refusal = regexkeys.problem(key)
            if refusal:
                raise ImportRefused(f"{name}: the entry “{entry.title or 'Untitled'}” cannot be used: {refusal}.")
            book.append(key)
    per_book = settings.KNOWLEDGE_REGEX_KEYS_PER_BOOK
    if len(book) > per_book:
        raise ImportRefused(f"{name}: this book has {len(book):,} regex keys; the limit is {per_book:,} per book.")
    others = _campaign_regex_keys(campaign_id, replacing)
    per_campaign = settings.KNOWLEDGE_REGEX_KEYS_PER_CAMPAIGN
    if len(others) + len(book) > per_campaign:
        raise ImportRefused(
            f"{name}: with this book the campaign would have {len(others) + len(book):,} regex keys; "
            f"the limit is {per_campaign:,} per campaign."
        )
    size = sum(regexkeys.size_of(regexkeys.split(k)[0]) for k in [*others, *book])
    if size > regexkeys.SIZE_PER_CAMPAIGN:
        raise ImportRefused(
            f"{name}: with this book the campaign's regex keys would unroll into {size:,} copies of their parts "
            f"when compiled; the limit is {regexkeys.SIZE_PER_CAMPAIGN:,} per campaign."
        )


def _campaign_regex_keys(campaign_id: int, replacing) -> list[str]:
    """The regex keys of the campaign's stored entries, but for those of
    the source `replacing`."""
    rows = (
        LoreEntry.objects.filter(source__campaign_id=campaign_id)
        .filter(~Q(regex_keys=[]) | ~Q(secondary_keys=[]))
        .only("regex_keys", "secondary_keys")
    )
    if replacing is not None:
        rows = rows.exclude(source=replacing)
    return [key for entry in rows.iterator(chunk_size=2000) for key in regex_keys_of(entry)]
