"""Entries made ready for evaluations: macros filled in their keys, their
book's defaults applied, sorted as SillyTavern sorts them (highest order
first, ties in the order given), and indexed by their keys' probes.

A prepared book is kept for the next evaluation of equal entries, books and
macros (a story's turns mostly read the same lorebook): the test is
equality, so a changed entry is never read stale, and it is cheap when the
caller hands the same Entry objects again (tuples compare items by
identity first).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worldinfo.buffer import source_flags
from worldinfo.macros import fill
from worldinfo.matching import Key, prepare
from worldinfo.records import BookSettings, Decision, Entry, Inputs
from worldinfo.timed import Timers

#: How many prepared books are kept (a worker serves several campaigns; a
#: book of 2,500 entries takes about a tenth of a second to prepare).
KEPT = 8


@dataclass(slots=True)
class Item:
    """One entry as the passes read it; `index` is its place in the sort."""

    entry: Entry
    index: int
    keys: tuple[Key | None, ...]
    secondary: tuple[Key | None, ...]
    case_sensitive: bool
    scan_depth: int | None
    book_depth: int
    include_names: bool
    flags: tuple[str, ...]
    scored: bool
    book_scoring: bool
    vectorizable: bool


@dataclass
class Book:
    """The prepared entries of one evaluation's inputs."""

    entries: tuple[Entry, ...]
    books: dict[str, BookSettings]
    macros: dict[str, str]
    items: list[Item]
    by_key: dict[str, Item]
    #: Items every pass considers: constant, keyless, or with a key no probe answers.
    always: list[int]
    #: Items a fixed rule may refuse: disabled, filtered, triggered, delayed.
    checked: list[Item]
    #: (scan depth, book depth, names, flags, case) → the items reading that text.
    readers: dict[tuple, set[int]]
    #: case sensitive → probe → items whose primary key has it.
    probes: dict[bool, dict[str, list[int]]]
    #: SillyTavern's availableRecursionDelayLevels: every entry's level, once, ascending.
    delay_levels: tuple[int, ...] = ()
    #: The items in the order the entries were given.
    given: list[Item] = field(default_factory=list)
    #: An entry's key → its place in `given`.
    position: dict[str, int] = field(default_factory=dict)
    #: The min-activations skew → every entry's "no key found" decision, in the order given.
    decisions: dict[int, list[Decision]] = field(default_factory=dict)
    #: (content, case sensitive) → the items with a probe in it; and contents' indexes.
    content_hits: dict[tuple[str, bool], set[int]] = field(default_factory=dict)
    content_indexes: dict = field(default_factory=dict)
    #: (key, (how, reason, until)) → that skipped decision, as turns repeat them.
    skipped: dict[tuple, Decision] = field(default_factory=dict)


_KEPT: list[Book] = []


def prepared(inputs: Inputs, macros: dict[str, str]) -> Book:
    for book in _KEPT:
        if book.entries == inputs.entries and book.books == inputs.books and book.macros == macros:
            return book
    book = _prepare(inputs, macros)
    _KEPT.insert(0, book)
    del _KEPT[KEPT:]
    return book


def _prepare(inputs: Inputs, macros: dict[str, str]) -> Book:
    entries = sorted(inputs.entries, key=lambda e: -e.order)
    items = [_item(entry, index, inputs.books.get(entry.book) or BookSettings(), macros)
             for index, entry in enumerate(entries)]
    book = Book(entries=inputs.entries, books=dict(inputs.books), macros=dict(macros), items=items,
                by_key={item.entry.key: item for item in items}, always=[], checked=[], readers={},
                probes={True: {}, False: {}})
    given = {id(entry): n for n, entry in enumerate(inputs.entries)}
    book.given = sorted(items, key=lambda item: given[id(item.entry)])
    book.position = {item.entry.key: n for n, item in enumerate(book.given)}
    book.delay_levels = tuple(sorted({int(e.delay_until_recursion) for e in entries if e.delay_until_recursion}))
    for item in items:
        entry = item.entry
        if not entry.enabled or entry.character_filter.names or entry.triggers or entry.delay:
            book.checked.append(item)
        reader = (item.scan_depth, item.book_depth, item.include_names, item.flags, item.case_sensitive)
        book.readers.setdefault(reader, set()).add(item.index)
        keys = [key for key in item.keys if key is not None]
        if entry.constant or not keys or any(key.regex or key.probe is None for key in keys):
            book.always.append(item.index)
            continue
        for key in keys:
            book.probes[item.case_sensitive].setdefault(key.probe, []).append(item.index)
    return book


def _item(entry: Entry, index: int, book: BookSettings, macros: dict[str, str]) -> Item:
    case = book.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
    whole = book.match_whole_words if entry.match_whole_words is None else entry.match_whole_words

    def keys(texts: tuple[str, ...]) -> tuple[Key | None, ...]:
        return tuple(prepare(fill(text, macros), case_sensitive=case, whole_words=whole) for text in texts)

    return Item(
        entry=entry, index=index, keys=keys(entry.keys), secondary=keys(entry.secondary_keys),
        case_sensitive=case, scan_depth=entry.scan_depth, book_depth=book.scan_depth,
        include_names=book.include_names, flags=source_flags(entry),
        scored=book.use_group_scoring if entry.use_group_scoring is None else entry.use_group_scoring,
        book_scoring=book.use_group_scoring, vectorizable=entry.vectorized or book.vectorize_all,
    )


def fixed_refusal(entry: Entry, inputs: Inputs, timers: Timers) -> tuple[str, str, int | None] | None:
    """(how, reason, until) when a rule that holds for every pass keeps the
    entry out, in SillyTavern's order of checks; None when none does."""
    if not entry.enabled:
        return "disabled", "disabled", None
    names = entry.character_filter.names
    if names:
        wanted = {name.strip().casefold() for name in names}
        present = any(name.strip().casefold() in wanted for name in inputs.names)
        if present if entry.character_filter.exclude else not present:
            listed = ", ".join(f"“{name}”" for name in names)
            return "filter", (f"excluded for {listed}" if entry.character_filter.exclude
                              else f"only for {listed}"), None
    if entry.triggers and inputs.generation not in entry.triggers:
        return "trigger", f"only on {', '.join(entry.triggers)} (this is {inputs.generation})", None
    if timers.is_delayed(entry):
        return "delay", f"delayed until chat length {entry.delay}", entry.delay
    if timers.is_cooling(entry) and not timers.is_sticky(entry):
        until = timers.cooldown[entry.key].end
        return "cooldown", f"cooling down until chat length {until}", until
    return None
