"""The story as a reader takes it away: Markdown, or HTML to print.

Only the lineage (the story being read) is exported, never abandoned
branches, and with or without the reader's own turns. A failed or empty
narration is not part of the story and is left out.
"""

from __future__ import annotations

from . import lineage, review
from .models import Action, Campaign


def story_actions(campaign: Campaign, *, with_reader: bool, held: bool = True) -> list[Action]:
    """The lineage's actions in the story; `held=False` leaves out what a
    player may not read yet: narrations waiting for the game master's review,
    and under review those still being written (storyapp.review.withheld)."""
    if campaign.head_id is None:
        return []
    head = Action.objects.only("depth").get(pk=campaign.head_id)
    actions = lineage.window(campaign.pk, campaign.head_id, head.depth + 1)
    hidden = review.withheld(actions, game_master=held)
    return [a for a in actions if a.in_story and (with_reader or a.kind != Action.Kind.PLAYER)
            and a.pk not in hidden]


def speaker(campaign: Campaign, action: Action) -> str:
    """Who a reader's action is written as: its seat in a shared story, else
    the campaign's persona (the game master's, or a lone reader's)."""
    return action.seat_name or campaign.persona_name or "You"


def as_markdown(campaign: Campaign, *, with_reader: bool, held: bool = True) -> str:
    parts = [f"# {campaign.title}"]
    for action in story_actions(campaign, with_reader=with_reader, held=held):
        if action.kind == Action.Kind.PLAYER:
            quoted = "\n".join(f"> {line}" if line else ">" for line in action.text.splitlines())
            parts.append(f"> **{speaker(campaign, action)}:**\n{quoted}")
        else:
            parts.append(action.text.strip())
    return "\n\n".join(parts) + "\n"
