"""Checking a password without holding a database connection, a few at a
time, behind the readers who are playing.

A password hash costs half a second of CPU. The request used to hold its
pooled connection through it, so 20 simultaneous log-ins on two web
processes emptied a pool of 12 and the readers already playing got 500s
("couldn't get a connection"). Here the user row is read, the connection is
handed back to the pool (with psycopg_pool, closing it returns it), and the
hash runs on one of LOREMASTER_PASSWORD_HASHES_AT_ONCE threads per process,
a burst waiting its turn instead of being refused. Those threads run at a
lower CPU priority (nice 10, where the system allows it): with a semaphore
alone, 50 log-ins at once still took the cores from the readers' pages
(their p95 34 -> 185 ms on two cores); lowered, the readers' requests go
first and the hashes use what is left. The hash threads touch no database:
an upgrade of an old hash is saved by the request's own thread.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.contrib.auth import get_user_model, hashers
from django.contrib.auth.backends import ModelBackend
from django.db import connection

#: How much lower than the web process's own the hash threads' priority is.
HASH_NICENESS = 10

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _lower_priority() -> None:
    """Lowers this thread's priority; Linux schedules threads one by one
    (setpriority takes a thread id). Elsewhere the hash runs at the
    process's own priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HASH_NICENESS)
    except (AttributeError, OSError):
        pass


def hash_threads() -> ThreadPoolExecutor:
    """This process's hash threads, made on first use."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=max(1, settings.LOREMASTER_PASSWORD_HASHES_AT_ONCE),
                thread_name_prefix="password-hash", initializer=_lower_priority,
            )
        return _pool


def release_connection() -> None:
    """Hands this thread's connection back to the pool, unless a transaction
    needs it (then it stays: closing would end the transaction)."""
    if not connection.in_atomic_block:
        connection.close()


def check(user, raw_password: str) -> bool:
    """`user.check_password`, with no connection held while it hashes and
    the hash on a hash thread; an old hash that Django would upgrade is
    upgraded and saved, as `check_password` does."""
    release_connection()
    encoded = user.password
    if not hash_threads().submit(hashers.check_password, raw_password, encoded).result():
        return False
    if _outdated(encoded):
        make(user, raw_password)
        user.save(update_fields=["password"])
    return True


def make(user, raw_password: str) -> None:
    """`user.set_password`, with no connection held while it hashes."""
    release_connection()
    user.password = hash_threads().submit(hashers.make_password, raw_password).result()
    user._password = raw_password  # what set_password keeps, for the password validators' signal


def _outdated(encoded: str) -> bool:
    preferred = hashers.get_hasher("default")
    return hashers.identify_hasher(encoded).algorithm != preferred.algorithm or preferred.must_update(encoded)


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
