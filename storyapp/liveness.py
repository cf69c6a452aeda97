"""How long running work may stay silent before it is taken to be dead.

Narrations, summary and memory jobs and index jobs all run in workers that
can be killed at any moment, and their broker messages can be lost (a Redis
restart, a deleted queue). Each piece of running work therefore touches its
own row while it runs, from a thread beside the work, so a worker waiting a
long time on a model is never mistaken for a dead one; a row that misses a
few beats belongs to a worker that is gone, and the workers' sweep hands the
work to another. One set of figures for all of them, so that a fault is
repaired within the same minute whatever it interrupted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import connection, connections

log = logging.getLogger(__name__)

#: How often running work touches its row.
BEAT_SECONDS = 5.0
#: Four missed beats: the worker is gone and the work may be taken over.
STALE_AFTER = timedelta(seconds=20)
#: How often the workers look for stale work (one worker per period does).
SWEEP_SECONDS = 10.0


@contextmanager
def beating(touch: Callable[[], object], *, every: float | None = None) -> Iterator[None]:
    """Runs `touch` every `every` seconds (BEAT_SECONDS) in a thread of its
    own while the block runs. The thread has its own database connection,
    closed when the block ends; a failed touch is logged and the next one
    tried.

    Work that runs inside a transaction (a caller's atomic block, as in
    tests that run a task in-process) does not beat: no other connection
    sees its rows before the commit, and the beat's own connection would
    wait on the very locks the work holds.
    """
    if connection.in_atomic_block:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(every or BEAT_SECONDS):
                try:
                    touch()
                except Exception as exc:
                    log.warning("A liveness beat failed: %s: %s", type(exc).__name__, exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=beat, name="liveness-beat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
