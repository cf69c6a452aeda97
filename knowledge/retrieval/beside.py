"""Work a turn's retrieval runs beside its own database queries.

The query's embedding (a request to the embedding server, or the local
model) and the cosines over a mapped library (numpy, which lets go of the
interpreter while it multiplies) need no database; the lexical search is a
database query the turn's thread only waits on. Run one beside the other,
the turn waits for the longer instead of the sum: in a 1M-passage instance
on PostgreSQL the cosines (about 9 ms) ran on the second core while the
full-text ranking (about 20 ms) ran in the server.

What runs here must not query the database: a thread has its own
connection, outside the turn's transaction, which would see other rows and
stay open. A query raises instead (`NoQueriesHere`), and any connection it
opened is closed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.db import connections

T = TypeVar("T")

#: Turns of one process searched at once (a threaded worker's narrations).
THREADS = 4

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class NoQueriesHere(RuntimeError):
    """A database query from work run beside the turn's own."""


def beside(work: Callable[[], T]) -> Callable[[], T]:
    """Starts `work` on a background thread; the returned call waits for
    its result (or raises what it raised)."""
    future = _threads().submit(_without_database, work)
    return future.result


def _threads() -> ThreadPoolExecutor:
    """This process's threads, made on first use (after a worker's fork)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="retrieval-beside")
        return _pool


def _refuse(execute, sql, params, many, context):
    raise NoQueriesHere(f"Work run beside a turn's queries asked the database: {sql[:200]}")


def _without_database(work: Callable[[], T]) -> T:
    handles = [connections[alias] for alias in connections]
    try:
        for handle in handles:
            handle.execute_wrappers.append(_refuse)
        return work()
    finally:
        for handle in handles:
            handle.execute_wrappers.remove(_refuse)
            handle.close()
