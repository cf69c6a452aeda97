"""Keeping Loremaster's own requests to one server within its slots.

A local server often serves one request at a time (llama-cpp-python
always; llama.cpp per its slots; KoboldCpp one). Sent together, a summary
and the next narration reach it at once: the second waits for the first,
its first-byte timeout runs out, and from then on summaries and narrations
fail in turn. So every request to a server with a known number of slots
first takes one: narrations first, then probes, then summaries and
memories, each in the order they asked. Waiting for a slot happens before
the request is sent, so it never counts against the first-byte timeout, and
the caller is told when it starts and stops waiting (the play page says
"waiting for the model server").

The slots are rows (EndpointLease), so every worker process on every host
sees the same ones. A taker serializes on the profile's row (PostgreSQL's
row lock; SQLite's write lock, taken by its first statement, an update), and
a lease beats from a thread while it lives: one that stopped beating
belonged to a dead worker and is cleared by the next taker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from lifecycle.beat import beating
from lifecycle.workers import this_worker

from .models import EndpointLease, EndpointProfile

#: A lease whose beat is older than this belonged to a dead worker.
STALE_SECONDS = 20
BEAT_SECONDS = 5
POLL_SECONDS = 0.25
#: Who goes first when several wait.
PRIORITY = {EndpointLease.Kind.NARRATION: 0, EndpointLease.Kind.PROBE: 1, EndpointLease.Kind.DERIVED: 2}


def capacity(profile: EndpointProfile) -> int | None:
    """Requests the server takes at once: the admin's setting, else what the
    server said; None for no limit."""
    return profile.max_concurrent_requests or profile.server_slots or None


@contextmanager
def held(profile: EndpointProfile, kind: str, *, waiting: Callable[[bool], object] | None = None) -> Iterator[None]:
    """Runs the block holding one of the server's slots, waiting for it
    first; `waiting(True)` when the wait starts and `waiting(False)` when it
    ends. A server with no known limit is not waited for."""
    limit = capacity(profile)
    if not limit:
        yield
        return
    now = timezone.now()
    lease = EndpointLease.objects.create(profile=profile, kind=kind, holder=this_worker(), since=now, beat=now)
    told = False
    try:
        with beating(lambda: EndpointLease.objects.filter(pk=lease.pk).update(beat=timezone.now()), every=BEAT_SECONDS):
            while not _take(lease, limit):
                if not told and waiting is not None:
                    waiting(True)
                    told = True
                time.sleep(POLL_SECONDS)
            if told and waiting is not None:
                waiting(False)
            yield
    finally:
        EndpointLease.objects.filter(pk=lease.pk).delete()


def _take(lease: EndpointLease, limit: int) -> bool:
    """Whether this lease may hold a slot now: fewer than `limit` held, and
    fewer waiting ahead of it than are free."""
    now = timezone.now()
    with transaction.atomic():
        # The write first: it takes SQLite's lock, so takers go one at a time there too.
        EndpointLease.objects.filter(pk=lease.pk).update(beat=now)
        EndpointProfile.objects.select_for_update().filter(pk=lease.profile_id).values_list("pk", flat=True).first()
        leases = EndpointLease.objects.filter(profile_id=lease.profile_id)
        leases.filter(beat__lt=now - timedelta(seconds=STALE_SECONDS)).delete()
        rows = list(leases.values("pk", "kind", "holding"))
        held_now = sum(1 for row in rows if row["holding"])
        ahead = sum(1 for row in rows if not row["holding"] and _order(row) < _order({"pk": lease.pk, "kind": lease.kind}))
        if held_now + ahead >= limit:
            return False
        return bool(leases.filter(pk=lease.pk).update(holding=True))


def _order(row: dict) -> tuple[int, int]:
    return PRIORITY.get(row["kind"], 9), row["pk"]
