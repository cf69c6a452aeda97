"""The liveness beat: running work touches its own row from a thread beside
it (lifecycle.policy says how often, and why)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, connections

from . import policy

log = logging.getLogger(__name__)


@contextmanager
def beating(touch: Callable[[], object], *, every: float | None = None) -> Iterator[None]:
    """Runs `touch` every `every` seconds (policy.BEAT_SECONDS) in a thread of its
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
            while not stop.wait(every or policy.BEAT_SECONDS):
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
