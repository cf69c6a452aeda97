"""Which stored actions a prompt carries: the newest that fit, from a stable
start (the anchor), so a server's prompt cache keeps its prefix."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .records import HistoryAction, Section
from .tokens import MESSAGE_OVERHEAD, count_tokens, truncate_to_last_tokens

#: When history must drop its oldest actions, it drops more than it has to (at
#: least this share of its room, or the newest SLACK_MESSAGES' worth), and
#: keeps that starting point (the anchor) while the story grows into the
#: slack: the prompt's prefix, which a server's cache reuses, then changes
#: once every few turns instead of on every turn.
HISTORY_SLACK = 0.25
SLACK_MESSAGES = 4


@dataclass(frozen=True)
class History:
    """The stored actions that made it in, oldest first, each with its count;
    `spent` includes each one's message overhead."""

    actions: tuple[HistoryAction, ...]
    spent: int
    truncated: bool
    anchor_kept: bool = False


def _cost(action: HistoryAction) -> int:
    return action.tokens + MESSAGE_OVERHEAD


def fit_history(actions: tuple[HistoryAction, ...], budget: int, *, anchor=None) -> History:
    """The newest actions that fit in `budget`, as one contiguous stretch.

    When everything fits, everything goes in. Otherwise the stretch starts at
    the previous turn's first action (`anchor`) if all from there still fits,
    so the prompt's prefix is the one the server cached last turn. When it
    does not (or there is none), the oldest actions are dropped until the rest
    leaves room for about two more turns (HISTORY_SLACK of the room at least,
    half at most), and that start is the next anchor.
    If even the newest action alone is too long, its end is kept: the latest
    words are what the next turn continues from.
    """
    counted = [
        replace(a, tokens=a.tokens if a.tokens is not None else count_tokens(a.text)) for a in actions
    ]
    suffix = [0] * (len(counted) + 1)
    for index in range(len(counted) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + _cost(counted[index])
    if suffix[0] <= budget:
        return History(tuple(counted), suffix[0], False, anchor_kept=anchor is not None)
    ids = [a.id for a in counted]
    if anchor in ids and suffix[ids.index(anchor)] <= budget:
        start = ids.index(anchor)
        return History(tuple(counted[start:]), suffix[start], False, anchor_kept=True)
    # Room for at least two more turns (four messages the size of the
    # newest), within a quarter to a half of the budget.
    recent = sum(_cost(a) for a in counted[-SLACK_MESSAGES:])
    room = budget - min(max(int(budget * HISTORY_SLACK), recent), budget // 2)
    start = next((i for i in range(len(counted)) if suffix[i] <= room), len(counted))
    if start < len(counted):
        return History(tuple(counted[start:]), suffix[start], False)
    if not counted or budget <= MESSAGE_OVERHEAD:
        return History((), 0, False)
    newest = counted[-1]
    if _cost(newest) <= budget:
        return History((newest,), _cost(newest), False)
    text = truncate_to_last_tokens(newest.text, budget - MESSAGE_OVERHEAD)
    kept = replace(newest, text=text, tokens=count_tokens(text))
    return History((kept,), _cost(kept), True)


def history_sections(actions: tuple[HistoryAction, ...]) -> list[Section]:
    """The history as report sections: one per action, labelled by speaker."""
    return [
        Section("narration" if action.kind == "ai" else "player_action", action.text, action.tokens)
        for action in actions
    ]

