"""Checking a password without holding a database connection, a few at a time.

A password hash costs half a second of CPU. The request used to hold its
pooled connection through it, so 20 simultaneous log-ins on two web
processes emptied a pool of 12 and the readers already playing got 500s
("couldn't get a connection"). Here the user row is read, the connection is
handed back to the pool (with psycopg_pool, closing it returns it), and the
hash runs in one of LOREMASTER_PASSWORD_HASHES_AT_ONCE slots per process:
a burst of log-ins waits its turn instead of taking every core from the
readers' pages. The next query takes a connection from the pool again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db import connection

_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def _semaphore() -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(max(1, settings.LOREMASTER_PASSWORD_HASHES_AT_ONCE))
        return _slots


@contextmanager
def hashing() -> Iterator[None]:
    """One of this process's hashing slots, waited for, never refused."""
    slots = _semaphore()
    with slots:
        yield


def release_connection() -> None:
    """Hands this thread's connection back to the pool, unless a transaction
    needs it (then it stays: closing would end the transaction)."""
    if not connection.in_atomic_block:
        connection.close()


def check(user, raw_password: str) -> bool:
    """`user.check_password`, with no connection held while it hashes."""
    release_connection()
    with hashing():
        return user.check_password(raw_password)


def make(user, raw_password: str) -> None:
    """`user.set_password`, with no connection held while it hashes."""
    release_connection()
    with hashing():
        user.set_password(raw_password)


class PoolFreeBackend(ModelBackend):
    """Django's model backend, hashing through `check`. An unknown username
    still costs one hash, as in Django, so timing does not tell which exist."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        model = get_user_model()
        if username is None:
            username = kwargs.get(model.USERNAME_FIELD)
        if username is None or password is None:
            return None
        try:
            user = model._default_manager.get_by_natural_key(username)
        except model.DoesNotExist:
            make(model(), password)
            return None
        if check(user, password) and self.user_can_authenticate(user):
            return user
        return None
