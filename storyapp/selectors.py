"""Reads that more than one page or command needs."""

from __future__ import annotations

from . import lineage
from .models import Action, ContextSnapshot

#: How far back the inspector looks for the previous narration to compare with.
PREVIOUS_LOOKBACK = 20


def previous_snapshot(action: Action) -> ContextSnapshot | None:
    """The snapshot of the narration before this one on the same lineage."""
    earlier = lineage.tail(action.campaign_id, action.parent_id, PREVIOUS_LOOKBACK)
    for candidate in reversed(earlier):
        if candidate.kind == Action.Kind.AI:
            snapshot = ContextSnapshot.objects.filter(action=candidate).first()
            if snapshot is not None:
                return snapshot
    return None


def with_snapshots(actions: list[Action]) -> set[int]:
    """Which of these actions have a stored context, in one query."""
    ids = [a.pk for a in actions if a.kind == Action.Kind.AI]
    return set(ContextSnapshot.objects.filter(action_id__in=ids).values_list("action_id", flat=True))
