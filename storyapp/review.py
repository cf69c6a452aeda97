"""Review mode and the leak flag: who may read a narration yet.

When a shared campaign is set to review, a finished narration is held:
its players and watchers read "The game master is reviewing the
narration…" in its place, by page, by the action's own URL and by its
stream, until the game master approves it (after an edit, if they like)
or regenerates it (Retry writes a new one, held in turn). A narration that
repeats a narrator-only or one seat's secret passage is flagged
(contextbuild.leaks); the flag is the game master's alone to see.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from contextbuild import leaks

from . import campaignevents
from .models import Action, Campaign

HELD_NOTICE = "The game master is reviewing the narration…"


def under_review(campaign: Campaign) -> bool:
    """Whether narrations wait for the game master: review is on and
    someone besides them reads the story (a lone reader reviews nobody)."""
    return campaign.review and campaign.memberships.exists()


def finished(campaign: Campaign, prose: str, report: dict) -> dict:
    """What a narration that ended with `prose` stores of review: the
    secrets its text repeats from its own prompt, and whether it is held."""
    found = [leak.as_record() for leak in leaks.find(prose, leaks.secret_passages(report))] if prose else []
    return {"leaks": found, "held_for_review": bool(prose) and under_review(campaign)}


def withheld(actions: Iterable[Action], *, game_master: bool) -> set[int]:
    """The narrations among `actions` a reader may not read yet: held ones,
    and, under review, those still being written. The game master reads all."""
    if game_master:
        return set()
    actions = [a for a in actions if a.kind == Action.Kind.AI]
    held = {a.pk for a in actions if a.held_for_review}
    writing = [a for a in actions if a.in_flight and not a.held_for_review]
    if writing and under_review(writing[0].campaign):
        held |= {a.pk for a in writing}
    return held


def state_head(head: Action | None, *, game_master: bool) -> Action | None:
    """The action whose state a reader is shown: a held narration's state
    block would tell its story, so a player or watcher reads the state from
    before the held narrations at the head."""
    while not game_master and head is not None and head.held_for_review:
        head = head.parent
    return head


def held_texts(campaign: Campaign) -> tuple[str, ...]:
    """The texts of the campaign's narrations not yet approved: a later
    prompt may have replayed one, and its inspector must not show it."""
    return tuple(t for t in Action.objects.filter(campaign=campaign, held_for_review=True)
                 .values_list("text", flat=True) if t.strip())


def narration_approve(*, action: Action, now: datetime) -> bool:
    """Lets the players read a held narration; False if it was not held.
    Told as a campaign event, so the players' pages fetch the story and
    read it without a reload (static/js/live.js)."""
    approved = bool(Action.objects.filter(pk=action.pk, held_for_review=True).update(held_for_review=False, reviewed=now))
    if approved:
        campaignevents.emit(action.campaign_id, "narration-approved", {"action": action.pk})
    return approved
