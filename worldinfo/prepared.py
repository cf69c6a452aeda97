"""Entries made ready for one evaluation: macros filled in their keys, their
book's defaults applied, sorted as SillyTavern sorts them (highest order
first, ties in the order given), and the rules that cannot change between
passes (disabled, character filter, trigger, delay, cooldown) decided once.
"""

from __future__ import annotations

from dataclasses import dataclass

from worldinfo.buffer import source_flags
from worldinfo.macros import fill
from worldinfo.matching import Key, prepare
from worldinfo.records import BookSettings, Entry, Inputs
from worldinfo.timed import Timers


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
    by_meaning: bool
    sticky: bool


def prepare_items(inputs: Inputs, macros: dict[str, str], timers: Timers) -> list[Item]:
    entries = sorted(inputs.entries, key=lambda e: -e.order)
    return [_item(entry, index, inputs.books.get(entry.book) or BookSettings(), inputs, macros, timers)
            for index, entry in enumerate(entries)]


def _item(entry: Entry, index: int, book: BookSettings, inputs: Inputs, macros: dict[str, str],
          timers: Timers) -> Item:
    case = book.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
    whole = book.match_whole_words if entry.match_whole_words is None else entry.match_whole_words

    def keys(texts: tuple[str, ...]) -> tuple[Key | None, ...]:
        return tuple(prepare(fill(text, macros), case_sensitive=case, whole_words=whole) for text in texts)

    return Item(
        entry=entry, index=index, keys=keys(entry.keys), secondary=keys(entry.secondary_keys),
        case_sensitive=case, scan_depth=entry.scan_depth, book_depth=book.scan_depth,
        include_names=book.include_names, flags=source_flags(entry),
        scored=book.use_group_scoring if entry.use_group_scoring is None else entry.use_group_scoring,
        book_scoring=book.use_group_scoring,
        by_meaning=(entry.vectorized or book.vectorize_all) and entry.key in inputs.by_meaning,
        sticky=timers.is_sticky(entry),
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
