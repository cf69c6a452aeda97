"""Sessions read from the cache and kept in the database, which go on when
the cache is down.

Django's cached_db backend raised the cache's ConnectionError out of every
logged-in page while Redis was down (the log-in too). Here every cache call
of the session goes through `Tolerant`: a cache that fails counts as a miss,
and a write to it is skipped, so the database, which holds every session
anyway, answers alone until Redis is back.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.sessions.backends import cached_db
from django.core.cache import caches

log = logging.getLogger(__name__)


class Tolerant:
    """The cache calls a session makes; a failing cache is a miss."""

    def __init__(self, cache):
        self.cache = cache

    def _try(self, call, *args, default=None):
        try:
            return call(*args)
        except Exception as exc:
            log.warning("The session cache did not answer (%s); using the database", type(exc).__name__)
            return default

    async def _atry(self, call, *args, default=None):
        try:
            return await call(*args)
        except Exception as exc:
            log.warning("The session cache did not answer (%s); using the database", type(exc).__name__)
            return default

    def get(self, key):
        return self._try(self.cache.get, key)

    def set(self, key, value, timeout):
        self._try(self.cache.set, key, value, timeout)

    def delete(self, key):
        self._try(self.cache.delete, key)

    def __contains__(self, key) -> bool:
        return bool(self._try(self.cache.has_key, key, default=False))

    async def aget(self, key):
        return await self._atry(self.cache.aget, key)

    async def aset(self, key, value, timeout):
        await self._atry(self.cache.aset, key, value, timeout)

    async def adelete(self, key):
        await self._atry(self.cache.adelete, key)


class SessionStore(cached_db.SessionStore):
    def __init__(self, session_key=None):
        super().__init__(session_key)
        self._cache = Tolerant(caches[settings.SESSION_CACHE_ALIAS])
