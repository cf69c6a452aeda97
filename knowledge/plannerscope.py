"""Planner settings for one search on PostgreSQL, and no statement after it.

`SET LOCAL` lasts to the end of the transaction. A search run on its own is
its own transaction, but inside a caller's (a management command, a test,
the benchmark) one search's settings steered every later statement: with
sequential and index scans off, PostgreSQL priced a one-row primary-key join
at 10^10, past its JIT threshold, and compiled it for 190 ms. There the
settings are made in a savepoint that is rolled back after the search, which
undoes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def planner_settings(settings: str) -> Iterator:
    """A cursor for the search, with `settings` (SET LOCAL statements, or
    none) in force for it alone."""
    if not connection.in_atomic_block:
        with transaction.atomic(), connection.cursor() as cursor:
            if settings:
                cursor.execute(settings)
            yield cursor
        return
    scope = transaction.savepoint()
    try:
        with connection.cursor() as cursor:
            if settings:
                cursor.execute(settings)
            yield cursor
    finally:
        transaction.savepoint_rollback(scope)
