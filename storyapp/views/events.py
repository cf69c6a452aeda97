"""A campaign's events, streamed to each member's play page as server-sent
events, and who is here.

The stream follows the event log (storyapp.campaignevents), so any web
process serves it and a reconnect resumes after the last event id it was
sent: the browser sends it as Last-Event-ID, a fresh page as ?after= (the
log's position when the page was rendered), so nothing between the page and
its stream is lost and nothing is sent twice.
"""

from __future__ import annotations

import asyncio
import json
import time

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.db import OperationalError, connection
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone

from .. import campaignevents
from ..access import place_in
from ..models import Campaign
from .params import number_param
from .stream import RECONNECT_AFTER_BUSY_MS, STREAM_KEEPALIVE_SECONDS, _sse

EVENTS_POLL_SECONDS = 0.25
#: The stream ends after this and the browser reconnects from its last
#: event id: a member removed meanwhile is then refused, and a long-lived
#: connection never outlives a deploy by much.
EVENTS_MAX_SECONDS = 5 * 60
#: The most events one look sends.
EVENTS_PER_LOOK = 200
#: How often the stream marks its member here and says who else is.
PRESENCE_SECONDS = campaignevents.MARK_EVERY_SECONDS


def _as_json(event) -> str:
    return json.dumps({"id": event.id, "kind": event.kind, "data": event.data, "audience": event.audience})


def _poll(place, user, after: int, *, mark: bool):
    """One look at the log for one page: (place, events after `after`, who
    is here or None when unchanged); place is None when no longer a member.
    Every query of the look in one call, and the connection handed back to
    the pool after it: a page holds its stream open for minutes, and 25 open
    pages each holding a pooled connection took every one of the web
    processes' (bin/load --profile shared-play), leaving the pages 503s."""
    try:
        if mark:
            # The campaign read again: a hand-over changes who its game master is.
            campaign = Campaign.objects.filter(pk=place.campaign.pk).first()
            place = campaign and place_in(campaign, user)
            if place is None:
                return None, [], None
            campaignevents.mark_seen(place, now=timezone.now())
        # A page far behind catches up a page of events per look.
        new = list(campaignevents.visible_to(place).filter(id__gt=after).order_by("id")[:EVENTS_PER_LOOK])
        asked = mark or any(event.kind == campaignevents.ARRIVED for event in new)
        return place, new, campaignevents.present(place.campaign, now=timezone.now()) if asked else None
    finally:
        if not connection.in_atomic_block:  # never inside a transaction (a test's, say)
            connection.close()


@login_required
async def campaign_events(request: HttpRequest, pk: int) -> HttpResponse:
    """Server-sent events for one member: each visible event as `change`
    (id: the event's id, data: its kind and ids as JSON), and `presence`
    (who is here) when that changes. Async, like the narration stream: a
    listening member costs a coroutine, not a web worker."""
    user = await request.auser()
    campaign = await Campaign.objects.of_member(user).filter(pk=pk).afirst()
    place = campaign and await sync_to_async(place_in)(campaign, user)
    if place is None:
        raise Http404("No such campaign.")
    after = number_param(request.headers.get("Last-Event-ID") or request.GET.get("after"))

    async def events():
        nonlocal place, after
        started = last_write = time.monotonic()
        presence_at, told_present = -PRESENCE_SECONDS, None
        yield "retry: 1000\n\n"
        while time.monotonic() - started < EVENTS_MAX_SECONDS:
            mark = time.monotonic() - presence_at >= PRESENCE_SECONDS
            if mark:
                presence_at = time.monotonic()
            try:
                place, new, here = await sync_to_async(_poll)(place, user, after, mark=mark)
            except OperationalError:
                # The pool had no connection: the browser reconnects after
                # `retry`, resuming from the last event id.
                yield f"retry: {RECONNECT_AFTER_BUSY_MS}\n\n"
                return
            if place is None:
                return  # no longer a member: the reconnect is refused
            if here is None:
                here = told_present
            for event in new:
                yield _sse("change", _as_json(event), event.id)
                after = event.id
                last_write = time.monotonic()
            if here != told_present:
                told_present = here
                yield _sse("presence", json.dumps(here))
                last_write = time.monotonic()
            if time.monotonic() - last_write > STREAM_KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
            await asyncio.sleep(EVENTS_POLL_SECONDS)

    return StreamingHttpResponse(
        events(),
        content_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
