"""The campaign's event log: what changed, in order, for the members' pages
to follow live (views.events), and who is here.

An event says only what changed and which action (ids, never text): a page
that hears of it fetches the story again through the access layer, so an
event cannot show a member what the story page would not.

Events are stored after the change commits, one at a time per campaign
(the campaign row locked while one is stored), so within a campaign ids
commit in order: a page that has seen event n has seen every event before
it, and resuming after n loses nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial

from django.db import transaction
from django.db.models import Q, QuerySet

from .access import Place
from .models import Campaign, CampaignEvent, Membership

#: A member counts as here while their page marked them this recently.
PRESENT_SECONDS = 20
#: A page marks its member at most this often.
MARK_EVERY_SECONDS = 5
#: The stored event a member's arrival is told by (see `mark_seen`).
ARRIVED = "presence"
#: How long events are kept: a page away longer reloads the story whole.
KEPT = timedelta(days=1)


def emit(campaign_id: int, kind: str, data: dict | None = None, audience: str = CampaignEvent.EVERYONE) -> None:
    """Stores an event once the current transaction commits (at once outside
    one), so a change rolled back is never told. Robust: a log that cannot
    be written never fails the change itself."""
    transaction.on_commit(partial(_store, campaign_id, kind, dict(data or {}), audience), robust=True)


def _store(campaign_id: int, kind: str, data: dict, audience: str) -> None:
    with transaction.atomic():
        # The lock orders the campaign's events: the next id is taken only
        # after this one has committed.
        if not list(Campaign.objects.select_for_update().filter(pk=campaign_id).values_list("pk", flat=True)):
            return  # the campaign went meanwhile
        CampaignEvent.objects.create(campaign_id=campaign_id, kind=kind, data=data, audience=audience)


def visible_to(place: Place) -> QuerySet[CampaignEvent]:
    """The campaign's events this member may see, oldest first: the game
    master sees all; a member those for everyone and for their own seat."""
    events = CampaignEvent.objects.filter(campaign=place.campaign)
    if place.is_game_master:
        return events
    mine = Q(audience=CampaignEvent.EVERYONE)
    if place.seat_name:
        mine |= Q(audience=place.seat_name)
    return events.filter(mine)


def latest_id(campaign: Campaign) -> int:
    """Where a page rendered now stands in the log (0 before any event)."""
    return CampaignEvent.objects.filter(campaign=campaign).order_by("-id").values_list("id", flat=True).first() or 0


def mark_seen(place: Place, *, now: datetime) -> bool:
    """Marks the member as here, at most every MARK_EVERY_SECONDS; True when
    this mark is their arrival (they were not here), which is told to the
    others as an event. Conditional UPDATEs, so two tabs arrive once."""
    if place.is_game_master:
        rows = Campaign.objects.filter(pk=place.campaign.pk)
        field = "game_master_seen"
    else:
        rows = Membership.objects.filter(pk=place.membership.pk)
        field = "last_seen"
    absent = Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lt": now - timedelta(seconds=PRESENT_SECONDS)})
    if rows.filter(absent).update(**{field: now}):
        emit(place.campaign.pk, ARRIVED, {"role": place.role.value})
        return True
    rows.filter(**{f"{field}__lt": now - timedelta(seconds=MARK_EVERY_SECONDS)}).update(**{field: now})
    return False


def present(campaign: Campaign, *, now: datetime) -> list[dict]:
    """Who is here: the game master first, then the members, as the page lists them."""
    since = now - timedelta(seconds=PRESENT_SECONDS)
    here = []
    gm = Campaign.objects.filter(pk=campaign.pk, game_master_seen__gte=since).values_list(
        "owner__username", flat=True).first()
    if gm is not None:
        here.append({"name": gm, "role": "gm", "seat": ""})
    members = Membership.objects.filter(campaign=campaign, last_seen__gte=since).values_list(
        "user__username", "role", "seat_name")
    here += [{"name": name, "role": role, "seat": seat} for name, role, seat in members]
    return here


def on_sweep(sender=None, *, now: datetime, **kwargs) -> None:
    """The workers' periodic sweep (lifecycle.signals.periodic_sweep): the
    log keeps a day. A page holds its place as an id, and one that asks
    after a pruned event is sent what followed it, so nothing it can still
    show is lost; the story page itself is read whole."""
    CampaignEvent.objects.filter(created__lt=now - KEPT).delete()
