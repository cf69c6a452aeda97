"""Inclusion groups, as SillyTavern's filterByInclusionGroups decides them.

Among one pass's candidates, per group (an entry may be in several): if
any member is sticky, only the sticky members stay; members cooling down or
delayed leave; with group scoring, members scoring below the group's best
leave; a group that already has an activated member from an earlier pass
admits no new one; otherwise "prioritize" members win by highest order, or
one member is drawn with chances weighted by `group_weight`.

One difference from SillyTavern, on purpose: a member that already lost in
another group is out of the running here (SillyTavern could still draw it,
leaving the group with no member at all).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Member:
    """What the group rules read of one candidate."""

    key: str
    title: str
    groups: tuple[str, ...]
    order: int
    weight: int
    prioritize: bool
    scored: bool
    group_scoring: bool
    sticky: bool
    timed_out: bool


def filter_groups(candidates: list[Member], earlier: dict[str, str], *, score: Callable[[str], int],
                  draw: Callable[[str], float]) -> tuple[dict[str, str], set[str]]:
    """The losers among `candidates` (by key) with the reason each lost,
    and which of them were turned away only because their group fired in an
    earlier pass (a reason that says less than the one they lost by then).
    `earlier` maps a group to the title of its member activated in an
    earlier pass; `score(key)` is a member's key score; `draw(group)` a
    seeded number in [0, 1). A group is scored when any member's book
    scores groups or any member asks for it (SillyTavern: the global
    setting or any member's own); then each member whose own setting, else
    its book's, says so leaves when it scores below the best."""
    grouped: dict[str, list[Member]] = {}
    for member in candidates:
        for group in member.groups:
            grouped.setdefault(group, []).append(member)
    lost: dict[str, str] = {}
    turned_away: set[str] = set()
    sticky_groups = _by_timed_effects(grouped, lost)
    for group, members in grouped.items():
        if group in sticky_groups:
            continue
        if any(m.group_scoring for m in members):
            _by_score(group, members, score, lost)
        running = [m for m in members if m.key not in lost]
        if group in earlier:
            for member in running:
                lost[member.key] = f"group “{group}” already has “{earlier[group]}” from an earlier pass"
                turned_away.add(member.key)
            continue
        if len(running) <= 1:
            continue
        _choose(group, running, draw, lost)
    return lost, turned_away


def _by_timed_effects(grouped: dict[str, list[Member]], lost: dict[str, str]) -> set[str]:
    sticky_groups = set()
    for group, members in grouped.items():
        sticky = [m for m in members if m.sticky]
        if sticky:
            sticky_groups.add(group)
            for member in members:
                if not member.sticky:
                    lost.setdefault(member.key, f"lost group “{group}” to “{sticky[0].title}” (sticky)")
        for member in members:
            if member.timed_out:
                lost.setdefault(member.key, f"left group “{group}”: cooling down or delayed")
    return sticky_groups


def _by_score(group: str, members: list[Member], score: Callable[[str], int], lost: dict[str, str]) -> None:
    scores = {m.key: score(m.key) for m in members}
    best = max(scores.values())
    leader = next(m for m in members if scores[m.key] == best)
    for member in members:
        if member.scored and scores[member.key] < best:
            lost.setdefault(member.key, f"lost group “{group}” to “{leader.title}” "
                                        f"(score {scores[member.key]} < {best})")


def _choose(group: str, running: list[Member], draw: Callable[[str], float], lost: dict[str, str]) -> None:
    prioritized = sorted((m for m in running if m.prioritize), key=lambda m: -m.order)
    if prioritized:
        winner = prioritized[0]
        why = f"prioritized, order {winner.order}"
    else:
        total = sum(m.weight for m in running)
        rolled = draw(group) * total
        winner, reached = None, 0
        for member in running:
            reached += member.weight
            if rolled <= reached:
                winner = member
                break
        if winner is None:
            return
        why = f"weighted draw {rolled:.1f} of {total}, weight {winner.weight}"
    for member in running:
        if member is not winner:
            lost.setdefault(member.key, f"lost group “{group}” to “{winner.title}” ({why})")
