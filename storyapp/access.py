"""The one way a view gets a campaign or one of its actions: through the
requesting reader's place in it, 404 otherwise.

Another reader's campaign answers exactly like one that does not exist, so a
guessed id confirms nothing; a member (player or watcher) asking for what
only the game master may do is told so (403), since the campaign is theirs
to know of. The library pages filter through `campaign_for` too.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404

from .models import Action, Campaign, Membership

GAME_MASTER_ONLY = "Only the game master of this story can do that."
WATCHERS_READ = "Watchers read along; only the game master and the players act."


class Role(enum.StrEnum):
    GAME_MASTER = "gm"
    PLAYER = Membership.Role.PLAYER.value
    WATCHER = Membership.Role.WATCHER.value


@dataclass(frozen=True)
class Place:
    """A reader's place in one campaign: their role, and their seat if they
    hold one (the game master holds none: they speak as the campaign's
    persona, as a lone reader always has)."""

    campaign: Campaign
    role: Role
    membership: Membership | None = None

    @property
    def is_game_master(self) -> bool:
        return self.role is Role.GAME_MASTER

    @property
    def may_act(self) -> bool:
        return self.role is not Role.WATCHER

    @property
    def seat_name(self) -> str:
        return self.membership.seat_name if self.membership else ""


def place_in(campaign: Campaign, user) -> Place | None:
    """The user's place in the campaign, or None when they have none."""
    if campaign.owner_id == user.pk:
        return Place(campaign, Role.GAME_MASTER)
    membership = Membership.objects.filter(campaign=campaign, user_id=user.pk).first()
    if membership is None:
        return None
    return Place(campaign, Role(membership.role), membership)


def place_for(request: HttpRequest, pk: int) -> Place:
    """Any member's view of the campaign (reading it); 404 for everyone else."""
    # The owner comes along: a lone reader's turn is written as theirs.
    campaign = get_object_or_404(Campaign.objects.of_member(request.user).select_related("owner"), pk=pk)
    place = place_in(campaign, request.user)
    if place is None:  # the membership went between the two queries: a non-member now
        raise Http404("No such campaign.")
    return place


def actor_for(request: HttpRequest, pk: int) -> Place:
    """A member who may act in the story: the game master or a player."""
    place = place_for(request, pk)
    if not place.may_act:
        raise PermissionDenied(WATCHERS_READ)
    return place


def campaign_for(request: HttpRequest, pk: int) -> Campaign:
    """The campaign for what only its game master does (settings, library,
    undo, redo, retry, branches, edits): 403 for a member, 404 for others."""
    place = place_for(request, pk)
    if not place.is_game_master:
        raise PermissionDenied(GAME_MASTER_ONLY)
    return place.campaign


def action_for(request: HttpRequest, pk: int, action_id: int) -> Action:
    """One action, for the game master's commands on it."""
    campaign = campaign_for(request, pk)
    return get_object_or_404(Action, pk=action_id, campaign=campaign)


def readable_action(place: Place, action_id: int) -> Action:
    """One action of the campaign, for any member reading the story."""
    return get_object_or_404(Action, pk=action_id, campaign=place.campaign)
