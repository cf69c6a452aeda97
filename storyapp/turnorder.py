"""Turn order in a shared campaign: who may act when, and when the narrator
answers (issue 27, Campaign.turn_mode).

- free: the game master and the players act at any time. An action that
  arrives while the narrator writes is kept (a WaitingTurn) and joins the
  story after that narration, one narration each, in arrival order.
- rounds: each seat (every player, and the game master when they act)
  acts once or passes per round. The round's actions are stored in order,
  and one narration answers them all when every player seat has acted or
  passed, the game master closes the round, or the round's timer runs out
  (while the game master's narrations are at their cap, a timed-out round
  waits closed, and is narrated when one of them ends).
- turns: the player seats act in the order they joined; the game master
  acts at any time. A seat that does not act within the timer is skipped.

Every change runs with the campaign row locked, so two sends at the same
moment are kept in one order, each once. Timers run only while the narrator
is idle, and are checked whenever the campaign is changed (a send, a
finished narration) and by the workers' sweep: the same idempotent
`settle`. A page view never writes; it shows the time left. A lone
reader's campaign (no members) is left to `services.turn_submit`, refused
while a narration is in flight, as ever.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from . import campaignevents, lineage, services
from .access import Place
from .models import Action, Campaign, Membership, TurnClock, WaitingTurn

Mode = Campaign.TurnMode

#: The longest round the lineage is read back for: more seats than a table holds.
ROUND_WALK = 64
#: Told when a round is closed and waits for a narration slot (`_expire`).
CLOSED = ("The round is closed: the narrator answers it as soon as one of the game master's other stories "
          "finishes its narration.")


def is_shared(campaign: Campaign) -> bool:
    """Whether the campaign has members, and so a turn order."""
    return Membership.objects.filter(campaign=campaign).exists()


def seat_label(membership: Membership) -> str:
    return membership.seat_name or membership.user.get_username()


def _seats(campaign: Campaign) -> list[Membership]:
    """The player seats, in the order their players joined."""
    return list(
        Membership.objects.filter(campaign=campaign, role=Membership.Role.PLAYER)
        .select_related("user").order_by("joined", "id")
    )


def _locked(campaign: Campaign) -> tuple[Campaign, TurnClock]:
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    clock, _ = TurnClock.objects.get_or_create(campaign=campaign)
    return campaign, clock


def _head(campaign: Campaign) -> Action | None:
    return Action.objects.filter(pk=campaign.head_id).first() if campaign.head_id else None


def _writing(campaign: Campaign) -> bool:
    head = _head(campaign)
    return head is not None and head.in_flight


def _busy(campaign: Campaign, clock: TurnClock) -> bool:
    """Whether the narrator is writing, actions wait for it, or a closed
    round waits for a narration slot."""
    return _writing(campaign) or campaign.waiting_turns.exists() or clock.closed


def _over_cap(campaign: Campaign) -> bool:
    """Whether the game master's narration cap (services.refuse_over_reader_cap) holds a narration back now."""
    try:
        services.refuse_over_reader_cap(campaign)
    except services.TurnRefused:
        return True
    return False


def _round_authors(campaign: Campaign) -> set[int]:
    """The readers whose actions make up the open round: the story's
    trailing player actions (those after its last narration), and those
    waiting for the narrator to finish answering the round before."""
    authors = set(campaign.waiting_turns.exclude(author=None).values_list("author_id", flat=True))
    head = _head(campaign)
    if head is None or head.in_flight:
        return authors
    for action in reversed(lineage.tail(campaign.pk, head.pk, ROUND_WALK)):
        if action.kind != Action.Kind.PLAYER:
            break
        if action.author_id is not None:
            authors.add(action.author_id)
    return authors


def _current(seats: list[Membership], clock: TurnClock) -> Membership | None:
    """The seat whose turn it is: the clock's, or the first when it has none
    (or its player left)."""
    return next((seat for seat in seats if seat.pk == clock.seat_id), seats[0] if seats else None)


def _advance(seats: list[Membership], clock: TurnClock, steps: int = 1) -> None:
    current = _current(seats, clock)
    if current is not None:
        clock.seat = seats[(seats.index(current) + steps) % len(seats)]


def _restart(campaign: Campaign, clock: TurnClock, *, now: datetime) -> None:
    """The clock starts now, or waits for the narrator when it is writing."""
    clock.started = None if _busy(campaign, clock) else now


def _place(campaign: Campaign, **turn) -> None:
    """A turn into the story (services.turn_place), and the head it moved to on this copy of the campaign."""
    services.turn_place(campaign=campaign, **turn)
    campaign.refresh_from_db(fields=["head"])


def _close_round(campaign: Campaign, clock: TurnClock, *, now: datetime) -> None:
    """One narration answers the round: after its last action, or, when
    every seat passed, the narrator writes on."""
    _place(campaign, text="", now=now)
    clock.passed, clock.started, clock.closed = [], None, False
    clock.save()


def _round_complete(campaign: Campaign, clock: TurnClock) -> bool:
    done = _round_authors(campaign) | set(clock.passed)
    return bool(done) and all(seat.user_id in done for seat in _seats(campaign))


def _expire(campaign: Campaign, clock: TurnClock, *, now: datetime) -> None:
    """Ends the round or the seat's turn whose time has run out.

    A round with an action or a pass in it closes, and is narrated, or,
    while the game master's narrations are at their cap, waits closed for
    one of them to end (`_narrate_closed`): refused, it would never close.
    An empty one starts again (there is nothing to answer). A turn passes
    to the next seat, once per whole period gone, so a late check skips as
    many seats as the timer did."""
    seconds = campaign.turn_seconds
    if not seconds or clock.started is None or campaign.turn_mode == Mode.FREE or _busy(campaign, clock):
        return
    periods = int((now - clock.started).total_seconds() // seconds)
    if periods < 1:
        return
    if campaign.turn_mode == Mode.ROUNDS:
        if not (_round_authors(campaign) or clock.passed):
            clock.started = now
        elif _over_cap(campaign):
            clock.closed, clock.started = True, None
        else:
            _close_round(campaign, clock, now=now)
            return
    else:
        seats = _seats(campaign)
        if not seats:
            return
        _advance(seats, clock, periods)
        clock.started += timedelta(seconds=periods * seconds)
    clock.save()
    campaignevents.emit(campaign.pk, "turn-order", {"expired": True})


def _release(campaign: Campaign, clock: TurnClock, *, now: datetime) -> None:
    """Gives waiting actions their place once the narrator is idle: in free
    and turn play the oldest, narrated on its own; in rounds all of them,
    as the new round's, which closes if that completes it. Starts the
    clock that waited for the narrator. Actions sent while a closed round
    waits are the next round's: they wait with it."""
    if _writing(campaign) or clock.closed:
        return
    waiting = list(campaign.waiting_turns.select_related("author"))
    rounds = campaign.turn_mode == Mode.ROUNDS
    for turn in waiting if rounds else waiting[:1]:
        # Stacked: one member's action never replaces another's unanswered one.
        _place(campaign, text=turn.text, author=turn.author, seat_name=turn.seat_name,
               stack=True, narrate=not rounds, now=now)
        turn.delete()
    if rounds and _round_complete(campaign, clock):
        _close_round(campaign, clock, now=now)
        return
    if waiting and not rounds:
        clock.started = None
        clock.save()
    elif clock.started is None:
        clock.started = now
        clock.save()


def settle(*, campaign: Campaign, now: datetime) -> None:
    """Brings a shared campaign's turn order up to date: timers that ran
    out, waiting actions whose narration may start. Safe to run any number
    of times; a lone reader's campaign is left alone."""
    if not is_shared(campaign):
        return
    with transaction.atomic():
        campaign, clock = _locked(campaign)
        _narrate_closed(campaign, clock, now=now)
        _expire(campaign, clock, now=now)
        _release(campaign, clock, now=now)


def _narrate_closed(campaign: Campaign, clock: TurnClock, *, now: datetime) -> None:
    """A round closed while the game master's narrations were at their cap
    is narrated once one of them has ended."""
    if clock.closed and not _writing(campaign) and not _over_cap(campaign):
        _close_round(campaign, clock, now=now)


def _reader_id(place: Place) -> int:
    return place.membership.user_id if place.membership else place.campaign.owner_id


def _refuse_out_of_turn(seats: list[Membership], clock: TurnClock, reader_id: int) -> None:
    current = _current(seats, clock)
    if current is not None and current.user_id != reader_id:
        raise services.TurnRefused(f"It is {seat_label(current)}'s turn. Wait for yours, then send your action.")


def _refuse_second_in_round(campaign: Campaign, clock: TurnClock, reader_id: int) -> None:
    if reader_id in _round_authors(campaign) or reader_id in clock.passed:
        if clock.closed:
            raise services.TurnRefused(CLOSED)
        raise services.TurnRefused(
            "You have already acted in this round. The narrator answers once every seat has acted or passed, "
            "or when the game master closes the round."
        )


def _refuse_over_cap_if_narrating(campaign: Campaign, clock: TurnClock, reader_id: int) -> None:
    """The game master's narration cap (services.refuse_over_reader_cap),
    checked when this action starts a narration now: the narrator idle, and
    in rounds, the action completing its round. An action that waits joins
    a narration already counted (the campaign counts once)."""
    if _busy(campaign, clock):
        return
    if campaign.turn_mode == Mode.ROUNDS:
        done = _round_authors(campaign) | set(clock.passed) | {reader_id}
        if not all(seat.user_id in done for seat in _seats(campaign)):
            return
    services.refuse_over_reader_cap(campaign)


def submit(*, place: Place, text: str, now: datetime) -> None:
    """A member's action, taken by the campaign's turn order: refused (with
    the reason) when it is not theirs to send now, otherwise kept and put
    into the story as soon as its place comes."""
    campaign = place.campaign
    if not is_shared(campaign):
        # A lone reader is the campaign's owner, playing its persona.
        services.turn_submit(campaign=campaign, text=text, now=now, author=campaign.owner, seat_name=place.seat_name)
        return
    settle(campaign=campaign, now=now)
    text = text.strip()
    reader_id = _reader_id(place)
    with transaction.atomic():
        campaign, clock = _locked(campaign)
        if campaign.turn_mode == Mode.ROUNDS:
            if not text:
                raise services.TurnRefused("Write your action for this round, or pass.")
            _refuse_second_in_round(campaign, clock, reader_id)
        elif campaign.turn_mode == Mode.TURNS and not place.is_game_master:
            if not text:
                raise services.TurnRefused("Write your action, or pass your turn.")
            seats = _seats(campaign)
            _refuse_out_of_turn(seats, clock, reader_id)
            _advance(seats, clock)
            clock.save()
        _refuse_over_cap_if_narrating(campaign, clock, reader_id)
        WaitingTurn.objects.create(campaign=campaign, author_id=reader_id, seat_name=place.seat_name, text=text)
        campaignevents.emit(campaign.pk, "turn-waiting", {"seat": place.seat_name})
        _release(campaign, clock, now=now)


def turn_pass(*, place: Place, now: datetime) -> None:
    """A player gives up their action for the round, or their turn."""
    campaign = place.campaign
    if place.membership is None:
        raise services.TurnRefused("Only players pass. The game master may close the round instead.")
    settle(campaign=campaign, now=now)
    reader_id = _reader_id(place)
    with transaction.atomic():
        campaign, clock = _locked(campaign)
        if campaign.turn_mode == Mode.ROUNDS:
            if clock.closed:
                raise services.TurnRefused(CLOSED)
            _refuse_second_in_round(campaign, clock, reader_id)
            _refuse_over_cap_if_narrating(campaign, clock, reader_id)
            clock.passed = [*clock.passed, reader_id]
        elif campaign.turn_mode == Mode.TURNS:
            seats = _seats(campaign)
            _refuse_out_of_turn(seats, clock, reader_id)
            _advance(seats, clock)
            _restart(campaign, clock, now=now)
        else:
            raise services.TurnRefused("In free play there is nothing to pass: anyone acts at any time.")
        clock.save()
        campaignevents.emit(campaign.pk, "turn-passed", {"seat": place.seat_name})
        _release(campaign, clock, now=now)


def round_close(*, campaign: Campaign, now: datetime) -> None:
    """The game master ends the round now: one narration answers what was sent."""
    settle(campaign=campaign, now=now)
    with transaction.atomic():
        campaign, clock = _locked(campaign)
        if campaign.turn_mode != Mode.ROUNDS:
            raise services.TurnRefused("Only a round can be closed, and this story is not played in rounds.")
        if clock.closed:
            raise services.TurnRefused(CLOSED)
        if _busy(campaign, clock):
            raise services.TurnRefused("The narrator is still answering the last round.")
        services.refuse_over_reader_cap(campaign)
        _close_round(campaign, clock, now=now)


def order_set(*, campaign: Campaign, mode: str, seconds: int, now: datetime) -> None:
    """The game master chooses the turn order and its timer; the round or
    the turn starts afresh (nothing sent is lost: waiting actions keep
    their place)."""
    with transaction.atomic():
        campaign, clock = _locked(campaign)
        campaign.turn_mode, campaign.turn_seconds = mode, seconds
        campaign.save(update_fields=["turn_mode", "turn_seconds", "updated"])
        clock.passed, clock.seat, clock.closed = [], None, False
        _restart(campaign, clock, now=now)
        clock.save()
        campaignevents.emit(campaign.pk, "turn-order", {"mode": mode})
    settle(campaign=campaign, now=now)


def after_narration(*, action_id: int, now: datetime) -> None:
    """A narration ended (done, failed or stopped): the next waiting action
    may take its place, and the slot it held under the game master's cap
    may be what a closed round of another of their stories waits for."""
    campaign = Campaign.objects.filter(actions__pk=action_id).first()
    if campaign is None:
        return
    settle(campaign=campaign, now=now)
    for other in Campaign.objects.filter(owner_id=campaign.owner_id, turn_clock__closed=True).exclude(pk=campaign.pk):
        settle(campaign=other, now=now)


def on_sweep(sender=None, *, now: datetime, **kwargs) -> None:
    """The workers' periodic sweep (lifecycle.signals.periodic_sweep): closes
    rounds and skips turns whose time ran out with nobody on the page, and
    places actions a lost narration hook left waiting."""
    due = set(WaitingTurn.objects.values_list("campaign_id", flat=True))
    due |= set(TurnClock.objects.filter(closed=True).values_list("campaign_id", flat=True))
    clocks = TurnClock.objects.filter(started__isnull=False, campaign__turn_seconds__gt=0).exclude(
        campaign__turn_mode=Mode.FREE).select_related("campaign")
    due |= {c.campaign_id for c in clocks if c.started + timedelta(seconds=c.campaign.turn_seconds) <= now}
    for campaign in Campaign.objects.filter(pk__in=due):
        settle(campaign=campaign, now=now)


@dataclass(frozen=True)
class SeatState:
    name: str
    user_id: int
    acted: bool
    passed: bool
    their_turn: bool


@dataclass(frozen=True)
class TurnState:
    """What the play page says of the turn order."""

    shared: bool
    mode: str
    mode_label: str
    seats: tuple[SeatState, ...] = ()
    #: Turns: the seat whose turn it is.
    whose_turn: SeatState | None = None
    #: Rounds: whether the game master has acted in this round.
    game_master_acted: bool = False
    #: Left on the round's or the turn's timer; None without one, or while the narrator writes.
    seconds_left: int | None = None
    #: Actions kept until the narrator is free.
    waiting: int = 0
    #: Rounds: the round timed out and waits for a narration slot (TurnClock.closed).
    closed: bool = False
    modes: tuple[tuple[str, str], ...] = tuple(Mode.choices)


def turn_state(campaign: Campaign, *, now: datetime) -> TurnState:
    """The turn order as the page shows it (reads only: `settle` writes)."""
    mode = Campaign.TurnMode(campaign.turn_mode)
    if not is_shared(campaign):
        return TurnState(shared=False, mode=mode.value, mode_label=mode.label)
    clock = TurnClock.objects.filter(campaign=campaign).first() or TurnClock(campaign=campaign)
    seats = _seats(campaign)
    acted = _round_authors(campaign) if mode == Mode.ROUNDS else set()
    passed = set(clock.passed) if mode == Mode.ROUNDS else set()
    current = _current(seats, clock) if mode == Mode.TURNS else None
    states = tuple(
        SeatState(name=seat_label(s), user_id=s.user_id, acted=s.user_id in acted, passed=s.user_id in passed,
                  their_turn=current is not None and s.pk == current.pk)
        for s in seats
    )
    left = None
    if campaign.turn_seconds and clock.started is not None and mode != Mode.FREE:
        left = max(0, int(campaign.turn_seconds - (now - clock.started).total_seconds()))
    return TurnState(
        shared=True, mode=mode.value, mode_label=mode.label, seats=states,
        whose_turn=next((s for s in states if s.their_turn), None),
        game_master_acted=campaign.owner_id in acted, seconds_left=left,
        waiting=campaign.waiting_turns.count(), closed=mode == Mode.ROUNDS and clock.closed,
    )
