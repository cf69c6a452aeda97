"""What the play page shows, for every view that renders it whole: the
story, its alternatives and commands, and the side panel's forms."""

from __future__ import annotations

from django.utils import timezone

from endpoints.client import endpoint_for

from .. import campaignevents, lineage, review, selectors, services, turnorder
from ..access import Place
from ..forms import MemoryForm, StateForm, TurnForm, WhisperForm
from ..models import Action, Campaign, Membership, Whisper

STORY_PAGE = 60


def head_of(campaign: Campaign) -> Action | None:
    return Action.objects.filter(pk=campaign.head_id).first() if campaign.head_id else None


def state_panel(campaign: Campaign, head: Action | None, form: StateForm | None = None) -> dict:
    """The story state panel's context: the form (bound when a correction
    was refused) and whether a narration in flight holds corrections back."""
    if form is None:
        form = StateForm(state=campaign.state_at(head), seats=selectors.seat_names(campaign))
    return {
        "state_form": form,
        "state_busy": head is not None and head.in_flight,
    }


def reading(place: Place | None, actions) -> dict:
    """What the story partial needs to know of its reader: the narrations
    they may not read yet, and whether they are the game master (who sees
    the review tools). An unknown reader is never the game master."""
    game_master = place is not None and place.is_game_master
    return {"withheld": review.withheld(actions, game_master=game_master), "game_master": game_master}


def player_seats(campaign: Campaign) -> list[str]:
    """The seats a whisper can go to: the players' characters."""
    return list(Membership.objects.filter(campaign=campaign, role=Membership.Role.PLAYER).exclude(seat_name="")
                .values_list("seat_name", flat=True))


def whispers_panel(campaign: Campaign, place: Place | None, form: WhisperForm | None = None) -> dict:
    """The whispers the reader may read (the game master all, a player their
    seat's, a watcher none) and, for the game master, the form to send one.
    `whispers_reader`: whether the page holds the panel at all, hidden while
    empty, so a whisper sent later has a place to be fetched into."""
    if place is None or not (place.is_game_master or place.seat_name):
        return {"whispers": [], "whisper_form": None, "whispers_reader": False}
    whispers = Whisper.objects.filter(campaign=campaign)
    if not place.is_game_master:
        return {"whispers": list(whispers.filter(seat_name=place.seat_name)), "whisper_form": None,
                "whispers_reader": True}
    seats = player_seats(campaign)
    return {"whispers": list(whispers), "whisper_form": form or (WhisperForm(seats=seats) if seats else None),
            "whispers_reader": True}


def story_context(campaign: Campaign, place: Place | None = None) -> dict:
    # Where in the event log this story stands, read before the story: an
    # event is stored after its change commits, so everything it tells of is
    # in what is read next, and anything later makes the live page refetch.
    # (Read after, a change landing in between was marked seen unshown.)
    last_event = campaignevents.latest_id(campaign)
    campaign.refresh_from_db(fields=["head"])
    head = Action.objects.filter(pk=campaign.head_id).first() if campaign.head_id else None
    actions = lineage.tail(campaign.pk, campaign.head_id, STORY_PAGE)
    alternatives = services.alternatives(head) if head is not None and head.kind == Action.Kind.AI else []
    profile = endpoint_for(campaign)
    index = next((i for i, a in enumerate(alternatives, 1) if a.pk == head.pk), 0) if head else 0
    return {
        "campaign": campaign,
        "head": head,
        "actions": actions,
        "inspectable": selectors.with_snapshots(actions),
        "earlier": actions[0] if actions and actions[0].parent_id else None,
        "alternatives": alternatives,
        "alternative_index": index,
        "previous_alternative": alternatives[index - 2] if index > 1 else None,
        "next_alternative": alternatives[index] if 0 < index < len(alternatives) else None,
        "can_undo": head is not None and not head.in_flight,
        "can_redo": (head is None or not head.in_flight) and services.redo_target(campaign, head) is not None,
        "endpoint": profile,
        "memory_form": MemoryForm(instance=campaign),
        "derived_trouble": selectors.derived_trouble(campaign),
        "turn_limit": TurnForm.base_fields["text"].max_length,
        "turn": turnorder.turn_state(campaign, now=timezone.now()),
        # The page's live stream starts there, and refetches the story only for what came after.
        "last_event": last_event,
        **state_panel(campaign, review.state_head(head, game_master=place is not None and place.is_game_master)),
        **reading(place, [*actions, *alternatives]),
        **whispers_panel(campaign, place),
    }
