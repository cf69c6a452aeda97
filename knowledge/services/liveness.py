"""Putting the jobs of dead workers back in the queue, and re-sending the
ones whose message was lost: knowledge's part of the workers' sweep
(lifecycle.signals.periodic_sweep; the timings are lifecycle.policy's).
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime

from django.db import transaction

from lifecycle import policy

from ..models import IndexJob
from .jobs import _enqueue, dispatch_held

log = logging.getLogger(__name__)


def jobs_recover(*, now: datetime, restarted_worker: str = "") -> list[int]:
    """Puts orphaned running jobs back in the queue and re-sends them.

    Orphaned: a heartbeat older than STALE_AFTER, or a claim by a process on
    this host that no longer exists (a worker killed and restarted here is
    recovered at once, without waiting out the heartbeat). A re-sent job
    that turns out to be alive after all is refused by the claim, harmlessly.
    """
    host = socket.gethostname()
    orphaned = []
    for job_id, worker, heartbeat in IndexJob.objects.running().values_list("pk", "worker", "heartbeat"):
        if policy.is_stale(heartbeat, now) or _dead_here(worker, host, restarted_worker):
            orphaned.append((job_id, worker))
    recovered = []
    for job_id, worker in orphaned:
        with transaction.atomic():
            if IndexJob.objects.running().filter(pk=job_id, worker=worker).update(
                state=IndexJob.State.QUEUED, step="Requeued: its worker stopped", worker="", heartbeat=None
            ):
                _enqueue(IndexJob(pk=job_id))
                recovered.append(job_id)
    if recovered:
        log.warning("Requeued index jobs whose worker stopped: %s", recovered)
    return recovered


def jobs_resend_lost(*, now: datetime, sent_before: datetime | None = None) -> list[int]:
    """Holds again the queued jobs whose message was sent before
    `sent_before` (STALE_AFTER ago, by default) and never picked up (a Redis
    restart, a deleted queue), then sends the held jobs again. A message that
    turns up after all is refused by the claim; a job waiting its turn behind
    others' is sent twice, harmlessly, and never more than a reader's fair
    share. A job waiting for its retry is dated then, and is not lost."""
    before = policy.stale_before(now) if sent_before is None else sent_before
    lost = list(IndexJob.objects.waiting().filter(heartbeat__lt=before).values_list("pk", flat=True))
    if lost:
        IndexJob.objects.waiting().filter(pk__in=lost, heartbeat__lt=before).update(heartbeat=None)
        log.warning("Sending again index jobs whose message was not picked up: %s", lost)
    dispatch_held()
    return lost


def jobs_reclaim(*, now: datetime, restarted_worker: str) -> list[int]:
    """What a worker does as it starts, so a killed worker's imports go on
    at once, not after STALE_AFTER and the next sweep: its dead
    predecessor's running jobs back in the queue (jobs_recover), and every
    job already sent sent again, since the messages the predecessor had
    fetched and not yet started died with it."""
    recovered = jobs_recover(now=now, restarted_worker=restarted_worker)
    return recovered + jobs_resend_lost(now=now, sent_before=now)


def on_sweep(sender=None, *, now: datetime, **kwargs) -> None:
    """The workers' periodic sweep: index jobs of dead workers and lost
    messages, and held jobs a missed dispatch left waiting."""
    jobs_recover(now=now)
    jobs_resend_lost(now=now)


def _dead_here(worker: str, host: str, restarted_worker: str) -> bool:
    name, _, pid = worker.rpartition(":")
    if name != host or not pid.isdigit():
        return False
    if worker == restarted_worker:
        return True  # this very process, just started: it runs nothing yet
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
