"""Per-reader limits on what all readers of an instance share.

A small group shares one instance: its narration workers, its indexing
workers, its disk. One reader (or a runaway script holding their session)
must not take it all, so each reader's turn rate, upload rate and number of
campaigns are capped. Pages answer a refusal with HTTP 429 and say when to
try again. Rates are counted in the cache (Redis when hosted), so every web
process counts together; a refused attempt is not counted. With the cache
down nothing is counted (rates fail open).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)


class OverQuota(Exception):
    """A reader went over a limit; `retry_after` is in seconds (0: not a rate)."""

    def __init__(self, message: str, retry_after: int = 0):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Rate:
    name: str
    what: str  # the plural noun, for the message
    window_seconds: int
    kept: str  # what the refusal leaves as it was, for the message

    @property
    def limit(self) -> int:
        return settings.LOREMASTER_READER_RATES[self.name]


TURNS = Rate("turns", "turns", 60, "nothing you typed is lost")
UPLOADS = Rate("uploads", "lore files uploaded", 3600, "nothing from this upload was stored")


#: The time rates are counted by: a window is a whole minute (or hour) of it.
clock = time.time


def _count(key: str, amount: int, timeout: int) -> int:
    """The window's count after adding `amount`: one increment once the
    window has its key (every spend but its first), which is what a turn pays."""
    try:
        return cache.incr(key, amount)
    except ValueError:  # the window's first spend, or its key just expired
        if cache.add(key, amount, timeout):
            return amount
        return cache.incr(key, amount)  # another process made it first


def _window_text(seconds: int) -> str:
    return "a minute" if seconds == 60 else "an hour" if seconds == 3600 else f"{seconds} seconds"


def spend(rate: Rate, reader_id: int, amount: int = 1, *, now: float | None = None) -> None:
    """Counts `amount` against the reader's rate in this window, or raises
    OverQuota (counting nothing) when it would go over."""
    now = clock() if now is None else now
    window = int(now // rate.window_seconds)
    key = f"quota:{rate.name}:{reader_id}:{window}"
    try:
        used = _count(key, amount, rate.window_seconds + 5)
    except Exception as exc:
        # Fail open: a rate keeps one reader from crowding the others out,
        # it is not a security boundary, and a reader must go on reading
        # while the cache (Redis) is down.
        log.warning("The cache did not answer (%s); the %s rate is not counted", type(exc).__name__, rate.name)
        return
    if used <= rate.limit:
        return
    cache.decr(key, amount)
    retry_after = max(1, int((window + 1) * rate.window_seconds - now))
    raise OverQuota(
        f"You have reached this instance's limit of {rate.limit} {rate.what} in {_window_text(rate.window_seconds)}. "
        f"Try again in {_wait_text(retry_after)}; {rate.kept}.",
        retry_after,
    )


def _wait_text(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = round(seconds / 60)
    return f"{minutes} minutes"


def over_quota(response, exc: OverQuota):
    """The page that says so, as HTTP 429 (with Retry-After for a rate)."""
    response.status_code = 429
    if exc.retry_after:
        response["Retry-After"] = str(exc.retry_after)
    return response
