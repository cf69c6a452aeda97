"""Reads that more than one page or command needs."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from . import lineage
from .models import Action, Campaign, ContextSnapshot, DerivedJob, Membership

#: Branch ends the branch view lists, the most recently written first.
BRANCHES_SHOWN = 50

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


@dataclass(frozen=True)
class Branch:
    end: Action
    current: bool


def branch_ends(campaign: Campaign) -> list[Branch]:
    """The ends of the story's branches (the leaves of the action tree):
    where Undo, Retry and edits left a path the reader can go back to."""
    ends = (
        Action.objects.filter(campaign=campaign)
        .annotate(has_children=Exists(Action.objects.filter(parent_id=OuterRef("pk"))))
        .filter(has_children=False)
        .order_by("-created", "-id")[:BRANCHES_SHOWN]
    )
    head = Action.objects.filter(pk=campaign.head_id).first() if campaign.head_id else None
    return [
        Branch(end=a, current=head is not None and lineage.contains(campaign.pk, a.pk, head))
        for a in ends
    ]


def derived_trouble(campaign: Campaign) -> list[DerivedJob]:
    """This story's failed summary and memory jobs, for the play page's notice
    (on its current lineage: an abandoned branch's troubles are not the reader's now)."""
    failed = list(DerivedJob.objects.filter(campaign=campaign, state=DerivedJob.State.FAILED).order_by("-updated")[:20])
    if not failed or campaign.head_id is None:
        return []
    ids = lineage.ids(campaign.pk, campaign.head_id)
    return [job for job in failed if job.anchor_id in ids]


def seats(campaign: Campaign) -> list[tuple[str, str]]:
    """The (name, description) of each player's seat, in the order they
    joined: who is at a shared story's table. Empty for a lone reader."""
    return list(
        Membership.objects.filter(campaign=campaign, role=Membership.Role.PLAYER)
        .exclude(seat_name="").values_list("seat_name", "seat_description")
    )


def seat_names(campaign: Campaign) -> tuple[str, ...]:
    return tuple(name for name, _ in seats(campaign))
