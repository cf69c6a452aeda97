"""Whether one entry activates in one pass, in SillyTavern's order of
checks: the "delay until recursion" levels and recursion exclusion (none of
which hold a sticky entry back), then constant, sticky, the primary keys,
the secondary logic, and last activation by meaning (an entry the semantic
search admitted, when its keys did not activate it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from worldinfo.matching import FOUND, MISSING, REFUSED, secondary_passes
from worldinfo.prepared import Item
from worldinfo.records import AND_ALL, NOT_ALL, NOT_ANY

if TYPE_CHECKING:
    from worldinfo.engine import Evaluation

LOGIC_WORDS = ("AND ANY", "NOT ALL", "NOT ANY", "AND ALL")


@dataclass
class Candidate:
    """An entry activated in this pass, before groups, roll and budget."""

    item: Item
    how: str
    reason: str
    parts: tuple[str, ...]


def consider(item: Item, recursion: bool, min_activations: bool, level: int, run: Evaluation) -> Candidate | None:
    """The entry as a candidate of this pass, or None with its reason
    recorded on `run`."""
    entry = item.entry
    sticky = run.timers.is_sticky(entry)
    delayed = entry.delay_until_recursion
    if delayed and not sticky and (not recursion or delayed > level):
        run.skip(entry, "recursion_delay", f"waits for recursion level {int(delayed)}")
        return None
    if recursion and run.settings.recursive and entry.exclude_recursion and not sticky:
        run.skip(entry, "no_key", "excluded from recursion; no key in the story", weak=True)
        return None
    depth = run.buffer.depth(item.scan_depth, item.book_depth)
    parts = run.buffer.parts(depth, item.include_names, item.flags, not min_activations)
    if entry.constant:
        return Candidate(item, "constant", "constant", parts)
    if sticky:
        until = run.timers.sticky[entry.key].end
        return Candidate(item, "sticky", f"sticky until chat length {until}", parts)
    how = "recursion" if recursion else "key"
    where = (f" (recursion level {run.level})" if recursion
             else f" (min activations, scan depth {depth})" if min_activations else "")
    primary = _first_found(item, parts, run)
    if primary is None:
        return _by_meaning(item, parts, run, _no_key(item, parts, run))
    if not (entry.selective and entry.secondary_keys):
        return Candidate(item, how, f"key “{primary.text}”{where}", parts)
    second = [run.matcher.match(key, parts, item.case_sensitive) if key else MISSING for key in item.secondary]
    if not secondary_passes(entry.logic, second):
        return _by_meaning(item, parts, run, _secondary_reason(item, primary.text, second))
    found = [key.text for key, answer in zip(item.secondary, second, strict=True) if key and answer == FOUND]
    logic = LOGIC_WORDS[entry.logic] if 0 <= entry.logic < len(LOGIC_WORDS) else str(entry.logic)
    also = f" with “{found[0]}”" if found else ""
    return Candidate(item, how, f"key “{primary.text}”{also} ({logic}){where}", parts)


def _by_meaning(item: Item, parts: tuple[str, ...], run: Evaluation,
                why: tuple[str, str] | None) -> Candidate | None:
    """Activation by meaning when the keys did not activate the entry; else
    the keys' reason, or none for a plain "no key found" (the decision every
    entry no rule spoke for gets at the end)."""
    if item.vectorizable and item.entry.key in run.inputs.by_meaning:
        return Candidate(item, "meaning", "by meaning (semantic search)", parts)
    if why is None:
        run.skipped.pop(item.entry.key, None)
    else:
        run.skip(item.entry, *why)
    return None


def _first_found(item: Item, parts: tuple[str, ...], run: Evaluation):
    """The first primary key found, as SillyTavern's `find` stops at it."""
    for key in item.keys:
        if key and run.matcher.match(key, parts, item.case_sensitive) == FOUND:
            return key
    return None


def _no_key(item: Item, parts: tuple[str, ...], run: Evaluation) -> tuple[str, str] | None:
    if not item.entry.keys:
        return "no_key", "has no keys"
    refused = [key.text for key in item.keys
               if key and key.regex and run.matcher.match(key, parts, item.case_sensitive) == REFUSED]
    if refused:
        return "no_key", f"no key found (regex key “{refused[0]}” not tried: refused or out of time)"
    return None


def _secondary_reason(item: Item, primary: str, answers: list[str]) -> tuple[str, str]:
    logic = item.entry.logic
    words = LOGIC_WORDS[logic] if 0 <= logic < len(LOGIC_WORDS) else str(logic)
    found = [key.text for key, answer in zip(item.secondary, answers, strict=True) if key and answer == FOUND]
    missing = [key.text for key, answer in zip(item.secondary, answers, strict=True) if key and answer != FOUND]
    if logic == NOT_ANY and found:
        detail = f"“{found[0]}” found"
    elif logic == NOT_ALL:
        detail = "all found"
    elif logic == AND_ALL and missing:
        detail = f"“{missing[0]}” missing"
    else:
        detail = "none found"
    return "secondary", f"key “{primary}” but secondary keys fail {words} ({detail})"
