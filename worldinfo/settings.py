"""The turn-level World Info settings when several books feed one turn.

SillyTavern has one global set of settings; Loremaster keeps them per book.
The settings that govern the whole evaluation combine by one rule, the most
permissive value: recursion is on if any book has it; the largest max
recursion steps, 0 (unlimited) winning; the largest min activations and
min-activations depth; the largest budget share and the largest cap, 0 (no
cap) winning. Per-entry defaults (scan depth, case, whole words, names,
group scoring) stay with the entry's own book.
"""

from __future__ import annotations

from dataclasses import dataclass

from worldinfo.records import BookSettings


@dataclass(frozen=True)
class TurnSettings:
    recursive: bool
    max_recursion_steps: int
    min_activations: int
    min_activations_depth_max: int
    budget_percent: int
    budget_cap: int
    scan_depth: int


def combine(books: list[BookSettings]) -> TurnSettings:
    books = books or [BookSettings()]

    def largest_or_zero(values: list[int]) -> int:
        return 0 if 0 in values else max(values)

    return TurnSettings(
        recursive=any(b.recursive for b in books),
        max_recursion_steps=largest_or_zero([b.max_recursion_steps for b in books]),
        min_activations=max(b.min_activations for b in books),
        min_activations_depth_max=max(b.min_activations_depth_max for b in books),
        budget_percent=max(b.budget_percent for b in books),
        budget_cap=largest_or_zero([b.budget_cap for b in books]),
        scan_depth=max(b.scan_depth for b in books),
    )


def budget(settings: TurnSettings, window: int) -> int:
    """SillyTavern's budget: round(percent × window / 100), at least 1,
    then the cap when one is set and lower. (JavaScript's Math.round rounds
    halves up, Python's round to even: floor(x + 0.5) matches it.)"""
    tokens = int(settings.budget_percent * window / 100 + 0.5) or 1
    if settings.budget_cap > 0 and tokens > settings.budget_cap:
        tokens = settings.budget_cap
    return tokens
