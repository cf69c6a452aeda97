"""Writes to the story: turns, undo/redo/retry, alternatives, edits.

Every function here that moves the head or adds actions is the one place its
change happens, and runs in one transaction with the campaign row locked, so
two tabs pressing Undo and Submit at the same moment cannot leave the head
pointing into a branch the other just abandoned. Stop is a single
conditional UPDATE; the few reads here sit beside the writes they serve.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F

from contextbuild.narrative import NarrativeState
from contextbuild.tokens import count_tokens
from lifecycle import sending

from . import campaignevents, derived, review
from .models import Action, Campaign, ContextSnapshot
from .narration import NARRATE

log = logging.getLogger(__name__)


class TurnRefused(Exception):
    """The request cannot be carried out as asked; the message says why."""


def _locked(campaign: Campaign) -> Campaign:
    return Campaign.objects.select_for_update().get(pk=campaign.pk)


def _head(campaign: Campaign) -> Action | None:
    if campaign.head_id is None:
        return None
    return Action.objects.get(pk=campaign.head_id)


def _move_head(campaign: Campaign, action: Action | None, *, now: datetime) -> None:
    campaign.head = action
    campaign.save(update_fields=["head", "updated"])
    if action is not None and action.visited != now:  # `_append` stamps a new action already
        Action.objects.filter(pk=action.pk).update(visited=now)
        action.visited = now


def _append(campaign: Campaign, parent: Action | None, *, kind: str, text: str,
            status: str = Action.Status.DONE, now: datetime, author=None, seat_name: str = "") -> Action:
    return Action.objects.create(
        campaign=campaign,
        author=author,
        seat_name=seat_name,
        parent=parent,
        depth=parent.depth + 1 if parent is not None else 0,
        kind=kind,
        text=text,
        token_count=count_tokens(text),
        status=status,
        state=campaign.state_at(parent),
        world_info_timers=dict(parent.world_info_timers) if parent is not None else {},
        visited=now,
        # For a pending narration: when it was queued (see narration.recover_stale).
        heartbeat=now if status == Action.Status.PENDING else None,
    )


def _refuse_while_narrating(head: Action | None) -> None:
    if head is not None and head.in_flight:
        raise TurnRefused("The narrator is still writing. Wait for it to finish or press Stop.")


def _refuse_while_waiting(campaign: Campaign) -> None:
    """A shared campaign's members' actions kept for their place
    (storyapp.turnorder) answer the story as it stands: between a
    narration's end and the next action's place, moving the head would put
    an action under a story its player never read."""
    if campaign.waiting_turns.exists():
        raise TurnRefused(
            "A player's action is waiting for its place in the story. Wait for its narration to start, then try again."
        )


def refuse_over_reader_cap(campaign: Campaign) -> None:
    """One reader's narrations in flight, over all their campaigns, are
    capped, so one reader's tabs cannot fill the narration workers that the
    other readers of the instance share. A narration is its campaign's
    owner's, whoever of the members asked for it (the owner's endpoint
    writes it), and a campaign counts once: its members share one story,
    not one narration each."""
    cap = settings.LOREMASTER_NARRATIONS_PER_READER
    in_flight = Action.objects.in_flight().filter(campaign__owner_id=campaign.owner_id, kind=Action.Kind.AI)
    busy = in_flight.order_by().values("campaign_id").distinct().count()
    if busy < cap:
        return
    if campaign.memberships.exists():
        raise TurnRefused(
            f"This story's game master already has {busy} stories being narrated. "
            "Wait for one to finish, then send this turn again."
        )
    raise TurnRefused(
        f"You already have {busy} narration{'s' if busy != 1 else ''} being written in your other stories. "
        "Wait for one to finish, then send this turn again."
    )


#: What a reader is told when the narration could not be handed to a worker.
BROKER_DOWN = (
    "The narration service is unavailable right now (its task queue, Redis, did not answer). "
    "Your turn is kept, and it is narrated as soon as the service is back."
)


def _enqueue_narration(action: Action) -> None:
    transaction.on_commit(lambda: _send_narration(action.pk))


def _send_narration(action_id: int) -> None:
    """Hands the narration to a worker. If the broker refuses, the turn is
    already stored: it stays pending, saying why, and the workers' sweep
    sends it again once the broker answers (narration.recover_stale), rather
    than a 500 and a turn the reader has to type again."""
    try:
        sending.send(NARRATE, action_id)
    except Exception:
        log.exception("Could not queue the narration of action %s", action_id)
        Action.objects.filter(pk=action_id, status=Action.Status.PENDING).update(error=BROKER_DOWN)


@transaction.atomic
def story_open(*, campaign: Campaign, now: datetime) -> Action | None:
    """Makes the reader's opening scene the story's first narration, once:
    only a story that has not begun gets one."""
    campaign = _locked(campaign)
    text = campaign.opening_text.strip()
    if campaign.head_id is not None or not text:
        return None
    opening = _append(campaign, None, kind=Action.Kind.AI, text=text, now=now)
    _move_head(campaign, opening, now=now)
    campaignevents.emit(campaign.pk, "head-moved", {"head": opening.pk})
    return opening


@transaction.atomic
def turn_submit(
    *, campaign: Campaign, text: str, now: datetime, author=None, seat_name: str = "",
) -> tuple[Action | None, Action]:
    """Stores the reader's action under the head and a pending narration after
    it, moves the head, and queues the narration once the transaction commits
    (see `turn_place`). Refused while a narration is in flight."""
    campaign = _locked(campaign)
    head = _head(campaign)
    _refuse_while_narrating(head)
    refuse_over_reader_cap(campaign)
    return _place(campaign, head, text=text, now=now, author=author, seat_name=seat_name)


@transaction.atomic
def turn_place(
    *, campaign: Campaign, text: str, now: datetime, author=None, seat_name: str = "",
    stack: bool = False, narrate: bool = True,
) -> tuple[Action | None, Action | None]:
    """Puts a turn into the story at the head, the narrator being idle (the
    caller has checked): the action, then (`narrate`) a pending narration
    queued once the transaction commits; the head moves to the last.

    Empty text means "continue": the narrator writes on with no new action.
    A reader's action is stacked on another one only when asked (`stack`: a
    round's actions, answered together): otherwise, at a reader's action
    that has no narration in the story (its narration failed, or came from
    an older install), new text replaces it as a branch, and empty text
    narrates it. `author` and `seat_name` say who sent the action and from
    which seat (none: the campaign's persona, as a lone reader has always
    played).
    """
    campaign = _locked(campaign)
    return _place(campaign, _head(campaign), text=text, now=now, author=author, seat_name=seat_name, stack=stack,
                  narrate=narrate)


def _place(
    campaign: Campaign, head: Action | None, *, text: str, now: datetime, author=None, seat_name: str = "",
    stack: bool = False, narrate: bool = True,
) -> tuple[Action | None, Action | None]:
    """`turn_place` on the campaign its caller locked, at the head it read."""
    text = text.strip()
    player = narration = None
    parent = head
    if head is not None and head.kind == Action.Kind.AI and not head.in_story:
        # A failed or empty narration is not part of the story: the new turn
        # replaces it, and it stays behind as an abandoned branch.
        parent = head.parent
    if text and not stack and parent is not None and parent.kind == Action.Kind.PLAYER:
        parent = parent.parent
    if text:
        player = _append(campaign, parent, kind=Action.Kind.PLAYER, text=text, now=now,
                         author=author, seat_name=seat_name)
        parent = player
    if narrate:
        narration = _append(campaign, parent, kind=Action.Kind.AI, text="", status=Action.Status.PENDING, now=now)
        _enqueue_narration(narration)
    if narration or player:
        _move_head(campaign, narration or player, now=now)
    if player is not None:
        campaignevents.emit(campaign.pk, "action", {"action": player.pk})
    if narration is not None:
        campaignevents.emit(campaign.pk, "narration-started", {"action": narration.pk})
    return player, narration


@dataclass(frozen=True)
class Undone:
    """Where an undo left the head, and the reader's words it took back (for the turn box)."""

    head: Action | None
    player_text: str


@transaction.atomic
def turn_undo(*, campaign: Campaign, now: datetime) -> Undone:
    """Steps back over one whole turn: the narration and the reader's action
    that asked for it, so the story never ends on an unanswered action. The
    undone actions stay stored, and redo brings them back until a new turn
    branches away from them."""
    campaign = _locked(campaign)
    head = _head(campaign)
    if head is None:
        raise TurnRefused("There is nothing to undo.")
    _refuse_while_narrating(head)
    _refuse_while_waiting(campaign)
    target = head.parent
    player_text = ""
    if head.kind == Action.Kind.PLAYER:
        player_text = head.text
    elif target is not None and target.kind == Action.Kind.PLAYER:
        player_text = target.text
        target = target.parent
    campaign.head = target
    campaign.save(update_fields=["head", "updated"])
    campaignevents.emit(campaign.pk, "undo", {"head": target.pk if target else None})
    return Undone(head=target, player_text=player_text)


@transaction.atomic
def turn_redo(*, campaign: Campaign, now: datetime) -> Action:
    """Steps forward over one whole turn, along the children it most recently came from."""
    campaign = _locked(campaign)
    head = _head(campaign)
    _refuse_while_narrating(head)
    _refuse_while_waiting(campaign)
    child = redo_target(campaign, head)
    if child is None:
        raise TurnRefused("There is nothing to redo.")
    if child.kind == Action.Kind.PLAYER:
        child = redo_target(campaign, child) or child
    _move_head(campaign, child, now=now)
    campaignevents.emit(campaign.pk, "redo", {"head": child.pk})
    return child


def redo_target(campaign: Campaign, head: Action | None) -> Action | None:
    children = Action.objects.filter(campaign=campaign, parent=head)
    return children.order_by(F("visited").desc(nulls_last=True), "-id").first()


@transaction.atomic
def turn_retry(*, campaign: Campaign, now: datetime) -> Action:
    """A fresh narration for the current position.

    At a finished narration: a new alternative beside it (the old one is kept
    and the reader can flip back). At a failed or stopped one: that same
    action is narrated again, so a flaky endpoint does not litter the story
    with dead alternatives. At a reader's action: its narration.
    """
    campaign = _locked(campaign)
    head = _head(campaign)
    if head is None:
        raise TurnRefused("There is nothing to retry yet. Write the first action.")
    _refuse_while_narrating(head)
    _refuse_while_waiting(campaign)
    refuse_over_reader_cap(campaign)
    if head.kind == Action.Kind.AI and head.status in {Action.Status.FAILED, Action.Status.STOPPED}:
        head.text, head.error, head.status, head.stop_requested = "", "", Action.Status.PENDING, False
        head.token_count, head.heartbeat, head.attempts = 0, now, 0
        head.save(update_fields=["text", "error", "status", "stop_requested", "token_count", "heartbeat", "attempts"])
        ContextSnapshot.objects.filter(action=head).delete()
        derived.withdraw_from(head)
        _enqueue_narration(head)
        campaignevents.emit(campaign.pk, "retry", {"action": head.pk})
        return head
    parent = head.parent if head.kind == Action.Kind.AI else head
    narration = _append(campaign, parent, kind=Action.Kind.AI, text="", status=Action.Status.PENDING, now=now)
    _move_head(campaign, narration, now=now)
    _enqueue_narration(narration)
    campaignevents.emit(campaign.pk, "retry", {"action": narration.pk})
    return narration


def alternatives(action: Action) -> list[Action]:
    """The narrations written for the same moment, oldest first."""
    if action.kind != Action.Kind.AI:
        return [action]
    return list(
        Action.objects.filter(campaign_id=action.campaign_id, parent_id=action.parent_id, kind=Action.Kind.AI)
        .order_by("id")
    )


@transaction.atomic
def alternative_select(*, campaign: Campaign, action: Action, now: datetime) -> Action:
    """Makes a sibling narration of the head the head."""
    campaign = _locked(campaign)
    head = _head(campaign)
    _refuse_while_narrating(head)
    _refuse_while_waiting(campaign)
    if head is None or head.kind != Action.Kind.AI or action.kind != Action.Kind.AI or action.parent_id != head.parent_id:
        raise TurnRefused("Only the alternatives of the latest narration can be chosen.")
    _move_head(campaign, action, now=now)
    campaignevents.emit(campaign.pk, "head-moved", {"head": action.pk})
    return action


@transaction.atomic
def action_edit(*, campaign: Campaign, action: Action, text: str) -> Action:
    """Rewrites an action's text in place; the next prompt reads the new text."""
    campaign = _locked(campaign)
    if action.in_flight:
        raise TurnRefused("A narration cannot be edited while it is being written.")
    text = text.strip()
    if not text:
        raise TurnRefused("An action cannot be empty. Use Undo to take it back.")
    action.text = text
    action.token_count = count_tokens(text)
    fields = ["text", "token_count"]
    if action.status == Action.Status.FAILED:
        # The reader kept the cut-off text and finished it: now it is story.
        action.status, action.error = Action.Status.DONE, ""
        fields += ["status", "error"]
    if action.kind == Action.Kind.AI:
        action.leaks = review.leaks_after_edit(action)
        fields.append("leaks")
    action.save(update_fields=fields)
    derived.withdraw_from(action)
    campaignevents.emit(campaign.pk, "action-edited", {"action": action.pk})
    return action


@transaction.atomic
def branch_jump(*, campaign: Campaign, action: Action, now: datetime) -> Action:
    """Moves the head to any action of the story (the branch view's jump).
    Nothing is deleted; the story read from now on is the path to it."""
    campaign = _locked(campaign)
    if action.campaign_id != campaign.pk:
        raise TurnRefused("That action is not in this story.")
    _refuse_while_narrating(_head(campaign))
    _refuse_while_waiting(campaign)
    _move_head(campaign, action, now=now)
    campaignevents.emit(campaign.pk, "head-moved", {"head": action.pk})
    return action


@transaction.atomic
def action_delete(*, campaign: Campaign, action: Action, now: datetime) -> Action | None:
    """Deletes the story's last action; the head steps back to its parent.
    Only the head, and only when no branch hangs under it: an action further
    up carries the rest of the story, and one that Undo left behind carries
    the turns Redo would bring back."""
    campaign = _locked(campaign)
    head = _head(campaign)
    if head is None or action.pk != head.pk:
        raise TurnRefused("Only the last action of the story can be deleted.")
    _refuse_while_narrating(head)
    _refuse_while_waiting(campaign)
    if Action.objects.filter(parent=head).exists():
        raise TurnRefused("Other turns branch from this action, so it stays. Use Undo to step back instead.")
    parent = head.parent
    campaign.head = parent
    campaign.save(update_fields=["head", "updated"])
    campaignevents.emit(campaign.pk, "action-deleted", {"action": head.pk, "head": parent.pk if parent else None})
    head.delete()
    return parent


def narration_stop(*, action: Action, now: datetime) -> bool:
    """Stops a narration at once, whatever the model is doing: the action is
    marked stopped with the text the reader has already seen, so the page
    settles within a poll of the stream. The worker notices the flag at its
    next chunk (or when its stalled call times out), keeps that text rather
    than what arrived after the click, and stores the snapshot."""
    stopped = bool(
        Action.objects.in_flight().filter(pk=action.pk).update(
            status=Action.Status.STOPPED, stop_requested=True, heartbeat=None
        )
    )
    if stopped:
        review.hold_cut_short(action.pk)
        campaignevents.emit(action.campaign_id, "narration-stopped", {"action": action.pk})
    return stopped


class StateRefused(TurnRefused):
    """A hand correction the state parser would have to drop, cut or guess
    at; `problems` names each."""

    def __init__(self, problems: tuple[str, ...]):
        super().__init__(" ".join(problems))
        self.problems = problems


def _state_holders(head: Action | None) -> tuple[list[Action], bool]:
    """The actions whose stored state the next turn may start from, and
    whether the opening state is one of them.

    That is the head and the actions above it up to the newest narration
    that is part of the story: a new turn at a failed narration, or at a
    reader's action, starts from further up (see `turn_submit`), and a
    retry reads the parent's state, so a correction written on the head
    alone would be lost there.
    """
    holders = []
    action = head
    while action is not None:
        holders.append(action)
        if action.kind != Action.Kind.PLAYER and action.in_story:
            return holders, False
        action = action.parent
    return holders, True


@transaction.atomic
def state_correct(*, campaign: Campaign, document: dict, based_on: str = "") -> dict:
    """Replaces the narrative state at the head with the reader's correction;
    the next prompt and retrieval query read it. Returns the stored document.

    1. Refused while a narration is in flight: its finish would write over
       the correction.
    2. Refused when `based_on`, the fingerprint of the state the form
       showed, is no longer the state: a narration finished, or another tab
       saved, since, and saving would undo that unseen.
    3. Checked by the one state parser: anything it would drop, cut or guess
       at is refused with every reason, and nothing is written.
    4. Written to every action the next turn may start from, or to the
       opening state when the story has none (`_state_holders`).
    """
    campaign = _locked(campaign)
    head = _head(campaign)
    _refuse_while_narrating(head)
    shown = NarrativeState.from_document(campaign.state_at(head))
    if based_on and based_on != shown.fingerprint():
        raise TurnRefused(
            "The story state changed after this form was shown (a narration finished, or it was saved elsewhere). "
            "Your text is kept below: check it against the story and save again."
        )
    state, problems = NarrativeState.read(document)
    if problems:
        raise StateRefused(problems)
    stored = state.as_document()
    holders, from_opening = _state_holders(head)
    Action.objects.filter(pk__in=[a.pk for a in holders]).update(state=stored)
    if from_opening:
        campaign.initial_state = stored
        campaign.save(update_fields=["initial_state", "updated"])
    return stored
