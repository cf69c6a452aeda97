"""The workers' sweep: the named entry point that repairs what faults left.

Every worker runs `run_forever` in a thread (started by ops.worker when it
is ready): every SWEEP_SECONDS it touches its heartbeat row (how the Jobs
page and /readyz know a worker is alive, on any broker) and calls
`sweep_once`. One worker sweeps each period, whoever takes the cache lock;
the sweep sends `lifecycle.signals.periodic_sweep`, and each app's receiver
sends again or fails what a lost message or a dead worker left (narrations,
derived jobs, index jobs), so nothing waits for a reader to reload a page
(which never writes on GET).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime

from django.core.cache import cache
from django.db import close_old_connections, connections
from django.utils import timezone

from endpoints import localembed
from lifecycle import policy, workers
from lifecycle.signals import periodic_sweep

from .models import WorkerHeartbeat

log = logging.getLogger(__name__)

#: Held by the worker sweeping this period, in the cache every worker shares.
SWEEP_LOCK = "loremaster-sweep"

_stop = threading.Event()


def sweep_once(now: datetime) -> bool:
    """Sweeps, unless another worker holds this period's lock; True if it
    swept. A receiver that fails is logged and the others still run."""
    try:
        if not cache.add(SWEEP_LOCK, workers.this_worker(), timeout=policy.SWEEP_SECONDS * 0.8):
            return False
    except Exception:
        log.warning("The cache is unreachable; sweeping without the lock")
    for receiver, outcome in periodic_sweep.send_robust(sender=None, now=now):
        if isinstance(outcome, Exception):
            log.error("The sweep's %s failed", getattr(receiver, "__qualname__", receiver), exc_info=outcome)
    return True


def beat(*, name: str, now: datetime, queues: Sequence[str] = (), local_models: Sequence[str] = ()) -> None:
    """Touches this worker's heartbeat row."""
    WorkerHeartbeat.objects.update_or_create(
        name=name[:200],
        defaults={"seen": now, "queues": ",".join(queues)[:200], "local_models": ",".join(local_models)[:200]},
    )


def gone(*, name: str) -> None:
    """Removes a worker's heartbeat row as it shuts down."""
    WorkerHeartbeat.objects.filter(name=name[:200]).delete()


def run_forever(name: str, queues: Sequence[str]) -> None:
    """Beats and sweeps every SWEEP_SECONDS until `stop` is called. The
    beat names the local embedding models this worker can run, for the
    pages that never load PyTorch."""
    local_models = [model for model in localembed.MODELS if not localembed.missing(model)]
    while not _stop.is_set():
        close_old_connections()
        try:
            beat(name=name, now=timezone.now(), queues=queues, local_models=local_models)
            sweep_once(timezone.now())
        except Exception:
            log.exception("Worker heartbeat or sweep failed")
        finally:
            connections.close_all()
        _stop.wait(policy.SWEEP_SECONDS)


def start(name: str, queues: Sequence[str]) -> threading.Thread:
    _stop.clear()
    thread = threading.Thread(target=run_forever, args=(name, queues), name="ops-sweeper", daemon=True)
    thread.start()
    return thread


def stop() -> None:
    _stop.set()
