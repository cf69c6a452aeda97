"""Telling a live worker from a dead one: the heartbeat timing, the workers'
heartbeat rows, and putting a dead worker's jobs back in the queue.

Its own module so the timings live in one place and can be tuned without
reading the indexing code: `STALE_AFTER` is defined here and nowhere else.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from storyapp import liveness

from ..models import IndexJob, WorkerHeartbeat
from .jobs import _enqueue, dispatch_held

log = logging.getLogger(__name__)

#: A running job whose heartbeat is older than this is taken to be orphaned
#: (its worker beats while it runs: storyapp.liveness, the one definition);
#: a worker restart on the same host recovers its dead predecessor's jobs at
#: once instead (see `jobs_recover`).
STALE_AFTER = liveness.STALE_AFTER


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def jobs_recover(*, now: datetime, restarted_worker: str = "") -> list[int]:
    """Puts orphaned running jobs back in the queue and re-sends them.

    Orphaned: a heartbeat older than STALE_AFTER, or a claim by a process on
    this host that no longer exists (a worker killed and restarted here is
    recovered at once, without waiting out the heartbeat). A re-sent job
    that turns out to be alive after all is refused by the claim, harmlessly.
    """
    host = socket.gethostname()
    orphaned = []
    for job_id, worker, heartbeat in IndexJob.objects.filter(state=IndexJob.State.RUNNING).values_list(
        "pk", "worker", "heartbeat"
    ):
        if heartbeat is None or heartbeat < now - STALE_AFTER or _dead_here(worker, host, restarted_worker):
            orphaned.append((job_id, worker))
    recovered = []
    for job_id, worker in orphaned:
        with transaction.atomic():
            if IndexJob.objects.filter(pk=job_id, state=IndexJob.State.RUNNING, worker=worker).update(
                state=IndexJob.State.QUEUED, step="Requeued: its worker stopped", worker="", heartbeat=None
            ):
                _enqueue(IndexJob(pk=job_id))
                recovered.append(job_id)
    if recovered:
        log.warning("Requeued index jobs whose worker stopped: %s", recovered)
    return recovered


def jobs_resend_lost(*, now: datetime) -> list[int]:
    """Holds again the queued jobs whose message was sent STALE_AFTER ago
    and never picked up (a Redis restart, a deleted queue), then sends the
    held jobs again. A message that turns up after all is refused by the
    claim; a job waiting its turn behind others' is sent twice, harmlessly,
    and never more than FAIR_SHARE of one reader's."""
    lost = list(
        IndexJob.objects.filter(state=IndexJob.State.QUEUED, heartbeat__lt=now - STALE_AFTER).values_list(
            "pk", flat=True
        )
    )
    if lost:
        IndexJob.objects.filter(pk__in=lost, state=IndexJob.State.QUEUED, heartbeat__lt=now - STALE_AFTER).update(
            heartbeat=None
        )
        log.warning("Sending again index jobs whose message was not picked up: %s", lost)
    dispatch_held()
    return lost


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


def worker_heartbeat(*, name: str, now: datetime, queues: Sequence[str] = (), local_models: Sequence[str] = ()) -> None:
    WorkerHeartbeat.objects.update_or_create(
        name=name[:200],
        defaults={"seen": now, "queues": ",".join(queues)[:200], "local_models": ",".join(local_models)[:200]},
    )


def worker_gone(*, name: str) -> None:
    WorkerHeartbeat.objects.filter(name=name[:200]).delete()
