"""The lifecycle as queries: one QuerySet each model's manager is built from.

A model declares its own vocabulary (which field holds the state, which
states mean waiting, running and failed, which field is the last sign of
life), so narrations (`status`, pending/streaming, `heartbeat`), derived
jobs (`state`, queued/running, `updated`) and index jobs (`state`,
queued/running, `heartbeat`) keep their columns and share the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from . import beat, policy


@dataclass(frozen=True)
class Vocabulary:
    """How one model names its lifecycle."""

    state: str
    waiting: str
    running: str
    failed: str
    seen: str


class LifecycleQuerySet(models.QuerySet):
    """Subclassed per model, which sets `vocabulary`."""

    vocabulary: Vocabulary

    def _state(self, *values: str) -> Q:
        return Q(**{f"{self.vocabulary.state}__in": list(values)})

    def _seen_before(self, moment: datetime) -> Q:
        return Q(**{f"{self.vocabulary.seen}__lt": moment})

    def waiting(self) -> LifecycleQuerySet:
        return self.filter(self._state(self.vocabulary.waiting))

    def running(self) -> LifecycleQuerySet:
        return self.filter(self._state(self.vocabulary.running))

    def in_flight(self) -> LifecycleQuerySet:
        """Waiting for a worker or running in one."""
        return self.filter(self._state(self.vocabulary.waiting, self.vocabulary.running))

    def stale(self, now: datetime) -> LifecycleQuerySet:
        """In flight and silent for STALE_AFTER: a lost message (waiting) or
        a dead worker (running). Work never seen is not stale here."""
        return self.in_flight().filter(self._seen_before(policy.stale_before(now)))

    def claimable(self, now: datetime) -> LifecycleQuerySet:
        """Waiting, or running under a dead worker."""
        v = self.vocabulary
        return self.filter(
            self._state(v.waiting) | (self._state(v.running) & self._seen_before(policy.stale_before(now)))
        )

    def claim(self, pk: int, *, now: datetime, **changes) -> bool:
        """Takes the work for this worker with one conditional UPDATE: True
        for exactly one of two workers that race for it (a duplicate
        delivery finds it running under a live beat, or finished)."""
        v = self.vocabulary
        claimed = self.claimable(now).filter(pk=pk).update(
            **{v.state: v.running, v.seen: now, "attempts": F("attempts") + 1, **changes}
        )
        return claimed == 1

    def beat(self, *, now: datetime) -> int:
        """Touches the running rows: they are alive."""
        return self.running().update(**{self.vocabulary.seen: now})

    @contextmanager
    def beating(self, clock: Callable[[], datetime] = timezone.now) -> Iterator[None]:
        """Beats these rows from a thread of their own while the block runs."""
        with beat.beating(lambda: self.beat(now=clock())):
            yield

    def requeue(self, *, now: datetime, **changes) -> int:
        """Puts work in flight back to waiting, seen now (so the sweep sends
        it again once a period, not on every pass): the sweep's re-send and
        the operator's Requeue."""
        v = self.vocabulary
        return self.in_flight().update(**{v.state: v.waiting, v.seen: now, **changes})

    def fail(self, **changes) -> int:
        """Ends work in flight as failed: the operator's Fail, or the sweep
        giving up on work that cost too many workers."""
        v = self.vocabulary
        return self.in_flight().update(**{v.state: v.failed, **changes})
