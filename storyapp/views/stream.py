"""A narration being written, streamed to the page as server-sent events."""

from __future__ import annotations

import asyncio
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import OperationalError
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.utils.html import escape

from lifecycle import workers

from .. import review
from ..models import Action, Campaign
from .params import number_param

STREAM_POLL_SECONDS = 0.2
STREAM_MAX_SECONDS = 15 * 60
STREAM_KEEPALIVE_SECONDS = 15
#: How often a waiting narration's stream asks whether any worker serves
#: the narration queue.
STREAM_WORKER_CHECK_SECONDS = 5
#: When the database pool is exhausted mid-stream, the browser reconnects after this.
RECONNECT_AFTER_BUSY_MS = 3000
#: A pending narration with no live worker to take it.
NO_NARRATOR = "no-narrator"
#: A reasoning model thinking before its first word of narration.
THINKING = "thinking"
#: A narration waiting for a busy model server's free slot (endpoints.slots).
SERVER_BUSY = "server-busy"
#: What the page's status line says while a narration is on its way.
STREAM_STATUS = {
    Action.Status.PENDING: "Waiting for a worker…",
    Action.Status.STREAMING: "The narrator is writing…",
    THINKING: "The narrator is thinking…",
    SERVER_BUSY: "Waiting for the model server: it is answering another request, and yours is next…",
    NO_NARRATOR: "No narration worker is running. Your action is kept, and the narration starts when one is back.",
}


def _sse(event: str, data: str, event_id: int | None = None) -> str:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    # A bare \r also ends an SSE line; normalise it so model output cannot
    # cut a data line short or smuggle in a field of its own.
    data = data.replace("\r\n", "\n").replace("\r", "\n")
    lines += [f"data: {line}" for line in data.split("\n")]
    return "\n".join(lines) + "\n\n"


@login_required
async def action_stream(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    """Server-sent events for a narration being written.

    Follows the action row rather than the worker, so any web process can
    serve it and a reconnect resumes from the last event id (the length of
    text already sent). Runs as an async view: a listening reader costs a
    coroutine, not a web worker.
    """
    user = await request.auser()
    # Any member follows a narration; the same filter as access.place_for.
    campaign = Campaign.objects.of_member(user).filter(pk=pk)
    owned = Action.objects.filter(pk=action_id, campaign_id=pk, campaign__in=campaign)
    if not await owned.aexists():
        raise Http404("No such narration.")
    offset = number_param(request.headers.get("Last-Event-ID") or request.GET.get("offset"))
    # Only the game master reads a narration under review before it is
    # approved, and the narrator's thinking (it read every seat's secrets).
    game_master = await Campaign.objects.filter(pk=pk, owner=user).aexists()
    in_review = not game_master and await sync_to_async(review.under_review)(await Campaign.objects.aget(pk=pk))

    async def events():
        nonlocal offset
        # The thinking is sent whole whenever it grew (a reveal's text, replaced).
        started = last_write = time.monotonic()
        told = None
        thought = 0
        workers_checked, unserved = -STREAM_WORKER_CHECK_SECONDS, False
        yield "retry: 1000\n\n"
        while time.monotonic() - started < STREAM_MAX_SECONDS:
            try:
                row = await owned.values(
                    "text", "status", "error", "thinking", "waiting_for_server", "held_for_review", "kind"
                ).afirst()
            except OperationalError:
                # The pool had no connection (or the database went away):
                # ending without `done` makes the browser reconnect by itself
                # after `retry`, resuming from the last event id.
                yield f"retry: {RECONNECT_AFTER_BUSY_MS}\n\n"
                return
            if row is None:
                break
            status = row["status"]
            waiting = status == Action.Status.PENDING and not row["error"]
            if waiting and time.monotonic() - workers_checked > STREAM_WORKER_CHECK_SECONDS:
                workers_checked = time.monotonic()
                unserved = not await sync_to_async(workers.serving)(settings.NARRATION_QUEUE, now=timezone.now())
            if waiting and unserved:
                status = NO_NARRATOR
            if status == Action.Status.STREAMING and row["thinking"] and not row["text"]:
                status = THINKING
            if status == Action.Status.STREAMING and row["waiting_for_server"]:
                status = SERVER_BUSY
            # A pending narration with an error is one the broker refused: it says why.
            message = row["error"] if status == Action.Status.PENDING and row["error"] else STREAM_STATUS.get(status)
            if message and message != told:
                told = message
                yield _sse("status", escape(message))
            writing = row["status"] in (Action.Status.PENDING, Action.Status.STREAMING)
            hidden = not game_master and row["kind"] == Action.Kind.AI and (
                row["held_for_review"] or (in_review and writing)
            )
            if game_master and len(row["thinking"]) > thought:
                thought = len(row["thinking"])
                yield _sse("thinking", escape(row["thinking"]))
            text = row["text"]
            if len(text) < offset:
                break  # a worker took over after another died and starts afresh: the page reloads the story
            if len(text) > offset and not hidden:
                yield _sse("chunk", escape(text[offset:]), len(text))
                offset = len(text)
                last_write = time.monotonic()
            if row["status"] not in (Action.Status.PENDING, Action.Status.STREAMING):
                break
            if time.monotonic() - last_write > STREAM_KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
            await asyncio.sleep(STREAM_POLL_SECONDS)
        yield _sse("done", "", offset)

    return StreamingHttpResponse(
        events(),
        content_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
