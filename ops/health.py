"""Whether this instance can serve readers: the facts behind /readyz and the
operators' monitor. Each check is cheap and bounded in time (a database
that does not answer costs DATABASE_TIMEOUT, a broker BROKER_TIMEOUT), so a
load balancer may ask every few seconds and gets its answer before its own
timeout."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg
import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

from lifecycle.workers import Worker
from storyapp.celery import app

from .models import WorkerHeartbeat

#: A worker that has not beaten for this long is taken to be dead (it beats
#: every 10 s; ops.sweeper).
WORKER_ALIVE_WITHIN = timedelta(seconds=45)
#: The queues a worker must be serving: the default one (indexing,
#: summaries, memories) and the narrations'.
QUEUES = ("celery", settings.NARRATION_QUEUE)
#: Seconds to connect to PostgreSQL for the check (libpq's connect_timeout, a whole number).
DATABASE_TIMEOUT = 2
#: Seconds a Redis broker may take to connect and to answer PING.
BROKER_TIMEOUT = 1.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_record(self) -> dict:
        return {"ok": self.ok, "detail": self.detail}


def database() -> Check:
    """PostgreSQL on a connection of its own, with a short connect timeout:
    the pool would wait its full timeout (10 s) for a server that is gone."""
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        if connection.vendor == "postgresql":
            params = {k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"}
            with psycopg.connect(**params, connect_timeout=DATABASE_TIMEOUT) as direct:
                direct.execute("SELECT 1")
        else:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        return Check("database", True, connection.vendor)
    except Exception as exc:
        return Check("database", False, f"{type(exc).__name__}: {exc}"[:200])


def migrations() -> Check:
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        return Check("migrations", False, f"{type(exc).__name__}: {exc}"[:200])
    if pending:
        return Check("migrations", False, f"{len(pending)} not applied: run manage.py migrate")
    return Check("migrations", True, "all applied")


def broker() -> Check:
    """Redis answers PING within BROKER_TIMEOUT (kombu's own connect retries
    for longer); any other broker, kombu connects once."""
    url = app.conf.broker_url
    try:
        if url.startswith(("redis://", "rediss://")):
            client = redis.Redis.from_url(url, socket_timeout=BROKER_TIMEOUT, socket_connect_timeout=BROKER_TIMEOUT)
            try:
                client.ping()
            finally:
                client.close()
        else:
            with app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT)
        return Check("broker", True, url.split("://", 1)[0])
    except Exception as exc:
        return Check("broker", False, f"{type(exc).__name__}: {exc}"[:200])


def live_workers(now: datetime) -> list[Worker]:
    """The workers whose heartbeat row is fresh (lifecycle.workers asks)."""
    rows = WorkerHeartbeat.objects.filter(seen__gte=now - WORKER_ALIVE_WITHIN).values_list(
        "name", "queues", "local_models"
    )
    return [Worker(name, _listed(queues), _listed(local_models)) for name, queues, local_models in rows]


def _listed(text: str) -> tuple[str, ...]:
    return tuple(item for item in text.split(",") if item)


def workers(*, now: datetime) -> Check:
    """At least one live worker on each queue."""
    live = live_workers(now)
    served = {queue for worker in live for queue in worker.queues}
    missing = [queue for queue in QUEUES if queue not in served]
    if missing:
        return Check("workers", False, "no live worker on the queue " + ", ".join(missing))
    return Check("workers", True, f"{len(live)} live worker{'s' if len(live) != 1 else ''}")


def readiness(*, now: datetime) -> list[Check]:
    checks = [database()]
    if checks[0].ok:
        checks += [migrations(), workers(now=now)]
    return [*checks, broker()]


def public(checks: list[Check]) -> dict:
    """What anyone may see: which checks pass and which fail, by name; the
    reasons (a server's address, the broker's error text) are for staff."""
    return {"ok": [c.name for c in checks if c.ok], "failing": [c.name for c in checks if not c.ok]}
