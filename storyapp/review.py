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
from functools import partial

from django.db import transaction

from contextbuild import leaks

from . import campaignevents, derived
from .models import Action, Campaign, ContextSnapshot, Whisper

HELD_NOTICE = "The game master is reviewing the narration…"


def under_review(campaign: Campaign) -> bool:
    """Whether narrations wait for the game master: review is on and
    someone besides them reads the story (a lone reader reviews nobody)."""
    return campaign.review and campaign.memberships.exists()


def leaks_in(prose: str, report: dict) -> list[dict]:
    """The secrets `prose` repeats from the prompt its report describes."""
    return [leak.as_record() for leak in leaks.find(prose, leaks.secret_passages(report))] if prose else []


def finished(campaign: Campaign, prose: str, report: dict) -> dict:
    """What a narration that ended with `prose` stores of review: the
    secrets its text repeats from its own prompt, and whether it is held."""
    return {"leaks": leaks_in(prose, report), "held_for_review": bool(prose) and under_review(campaign)}


def hold_cut_short(action_id: int) -> None:
    """A narration ended before its reply did (Stop, a failure, a worker
    given up, an operator's Fail) keeps the text it had, which players must
    not read unreviewed either: under review it is held like a finished one."""
    action = Action.objects.filter(pk=action_id).select_related("campaign").first()
    if action is not None and action.text and under_review(action.campaign):
        Action.objects.filter(pk=action_id).update(held_for_review=True)


def leaks_after_edit(action: Action) -> list[dict]:
    """A narration's leak flag for its text as it now stands: an edit may
    have taken the secret out (or written one in), checked against the
    prompt it was written from."""
    report = ContextSnapshot.objects.filter(action=action).values_list("report", flat=True).first()
    return leaks_in(action.text, report or {})


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
    Told as an event, so the members' live pages fetch the story that now
    shows it (they were told of the narration's end while it was held)."""
    approved = bool(
        Action.objects.filter(pk=action.pk, held_for_review=True).update(held_for_review=False, reviewed=now)
    )
    if approved:
        campaignevents.emit(action.campaign_id, "narration-approved", {"action": action.pk})
        # What it gives rise to waited for the approval (derived.after_narration).
        transaction.on_commit(partial(derived.after_narration, action.pk), robust=True)
    return approved


def whisper_to_seat(*, campaign: Campaign, seat_name: str, text: str) -> Whisper:
    """A note from the game master to one seat. Told as an event for that
    seat alone (and the game master), so its player's page fetches its
    whispers (views.review.whispers_panel_view) without a reload."""
    whisper = Whisper.objects.create(campaign=campaign, seat_name=seat_name, text=text)
    campaignevents.emit(campaign.pk, "whisper", {"whisper": whisper.pk}, audience=seat_name)
    return whisper
