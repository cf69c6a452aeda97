"""What the operators' Jobs page reads: index jobs, narrations and derived
jobs under way or failed, and the queue's figures."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


from knowledge.models import IndexJob
from storyapp.models import Action, DerivedJob

from .health import WORKER_ALIVE_WITHIN
from .models import WorkerHeartbeat

#: Index jobs the page lists.
MONITOR_ROWS = 200
#: Rows of each other kind (narrations, derived jobs) the page lists.
MONITOR_STORY_ROWS = 50


def monitor_jobs(*, state: str = "", limit: int = MONITOR_ROWS) -> list[IndexJob]:
    jobs = IndexJob.objects.select_related("source__campaign__owner").defer("source__content")
    if state:
        jobs = jobs.filter(state=state)
    return list(jobs.order_by("-created", "-id")[:limit])


@dataclass(frozen=True)
class Health:
    queued: int
    running: int
    failed: int
    workers_alive: int
    last_heartbeat: datetime | None


def monitor_health(*, now: datetime) -> Health:
    counts = {state: 0 for state in IndexJob.State.values}
    for state in IndexJob.objects.values_list("state", flat=True).filter(
        state__in=[IndexJob.State.QUEUED, IndexJob.State.RUNNING, IndexJob.State.FAILED]
    ):
        counts[state] += 1
    beats = WorkerHeartbeat.objects.order_by("-seen")
    last = beats.values_list("seen", flat=True).first()
    return Health(
        queued=counts[IndexJob.State.QUEUED],
        running=counts[IndexJob.State.RUNNING],
        failed=counts[IndexJob.State.FAILED],
        workers_alive=beats.filter(seen__gte=now - WORKER_ALIVE_WITHIN).count(),
        last_heartbeat=last,
    )


def monitor_narrations(*, limit: int = MONITOR_STORY_ROWS) -> list[Action]:
    """The newest narrations that are under way or failed: what a reader
    is waiting for, or was let down by."""
    narrations = Action.objects.filter(kind=Action.Kind.AI)
    busy = narrations.in_flight() | narrations.filter(status=Action.Status.FAILED)
    return list(busy.select_related("campaign__owner").defer("text", "state").order_by("-created", "-id")[:limit])


def monitor_derived(*, limit: int = MONITOR_STORY_ROWS) -> list[DerivedJob]:
    """The newest summary and memory jobs, failed ones first."""
    jobs = DerivedJob.objects.select_related("campaign__owner")
    failed = list(jobs.filter(state=DerivedJob.State.FAILED).order_by("-updated")[:limit])
    rest = list(jobs.exclude(state=DerivedJob.State.FAILED).order_by("-updated")[: max(0, limit - len(failed))])
    return failed + rest
