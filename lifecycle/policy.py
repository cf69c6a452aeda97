"""The lifecycle's figures and rules, pure: no Django, no database.

Running work touches its row every BEAT_SECONDS from a thread beside it, so
a worker waiting a long time on a model is never mistaken for a dead one;
work silent for STALE_AFTER (four missed beats) belongs to a worker that is
gone, or its broker message was lost (a Redis restart, a deleted queue), and
the workers' sweep, every SWEEP_SECONDS, hands it to another. One set of
figures for every kind of work, so a fault is repaired within the same
minute whatever it interrupted.
"""

from __future__ import annotations

from datetime import datetime, timedelta

#: How often running work touches its row.
BEAT_SECONDS = 5.0
#: Four missed beats: the worker is gone and the work may be taken over.
STALE_AFTER = timedelta(seconds=20)
#: How often the workers look for stale work (one worker per period does).
SWEEP_SECONDS = 10.0
#: Seconds before each further attempt of work that met a temporary failure
#: (an endpoint down); the last figure repeats.
BACKOFF_SECONDS = (10, 30, 60, 120, 300)


class RetryLater(Exception):
    """A failure another attempt may fix: the work went back to its queue,
    and the task retries after `countdown` seconds."""

    def __init__(self, error: str, countdown: int):
        super().__init__(error)
        self.countdown = countdown


def stale_before(now: datetime) -> datetime:
    """Work last seen before this is stale."""
    return now - STALE_AFTER


def is_stale(seen: datetime | None, now: datetime) -> bool:
    """Whether running work last seen at `seen` has gone silent; running
    work never seen (no beat stored) is."""
    return seen is None or seen < stale_before(now)


def backoff(attempt: int) -> int:
    """Seconds to wait after the `attempt`-th attempt (from 1) failed."""
    return BACKOFF_SECONDS[min(max(attempt, 1) - 1, len(BACKOFF_SECONDS) - 1)]


def gives_up(attempts: int, max_attempts: int) -> bool:
    """Whether work that has had `attempts` attempts has had its last: a
    piece of work that keeps killing its worker must not kill them all."""
    return attempts >= max_attempts


def retry_in(attempt: int, *, final: bool, max_attempts: int | None = None) -> int | None:
    """After a failed attempt: the seconds until the next one, or None when
    the work fails for good (the caller's `final`, its task being out of
    retries, or the `max_attempts`-th attempt where the row counts them)."""
    if final or (max_attempts is not None and gives_up(attempt, max_attempts)):
        return None
    return backoff(attempt)
