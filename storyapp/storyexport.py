"""The story as a reader takes it away: Markdown, or HTML to print.

Only the lineage (the story being read) is exported, never abandoned
branches, and with or without the reader's own turns. A failed or empty
narration is not part of the story and is left out.
"""

from __future__ import annotations

from . import lineage
from .models import Action, Campaign


def story_actions(campaign: Campaign, *, with_reader: bool) -> list[Action]:
    if campaign.head_id is None:
        return []
    head = Action.objects.only("depth").get(pk=campaign.head_id)
    actions = lineage.window(campaign.pk, campaign.head_id, head.depth + 1)
    return [a for a in actions if a.in_story and (with_reader or a.kind != Action.Kind.PLAYER)]


def speaker(campaign: Campaign, action: Action) -> str:
    """Who a reader's action is written as: its seat in a shared story, else
    the campaign's persona (the game master's, or a lone reader's)."""
    return action.seat_name or campaign.persona_name or "You"


def as_markdown(campaign: Campaign, *, with_reader: bool) -> str:
    parts = [f"# {campaign.title}"]
    for action in story_actions(campaign, with_reader=with_reader):
        if action.kind == Action.Kind.PLAYER:
            quoted = "\n".join(f"> {line}" if line else ">" for line in action.text.splitlines())
            parts.append(f"> **{speaker(campaign, action)}:**\n{quoted}")
        else:
            parts.append(action.text.strip())
    return "\n\n".join(parts) + "\n"
