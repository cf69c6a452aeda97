"""Log-ins take turns before they take a thread.

Django runs each request's sync view on one of a few executor threads per
web process (asgiref's, about cores + 4). A password hash waits for a hash
thread (storyapp.passwords), and a burst of 50 log-ins that each waited
inside its view held every executor thread: the readers already playing
queued behind them (their p95 34 -> 185-217 ms in bin/faults, 5x). Here, in
front of Django, a log-in POST waits on the event loop for one of
LOREMASTER_PASSWORD_HASHES_AT_ONCE places, so the executor threads stay
free for the pages. Waiting costs nothing and is never refused.
"""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.urls import reverse

from .limits import Receive, Scope, Send

#: The pages whose POST checks a password.
PASSWORD_PAGES = ("login", "admin:login", "password_change")


class LoginQueue:
    def __init__(self, app):
        self.app = app
        self._places: asyncio.Semaphore | None = None
        self._paths: frozenset[str] | None = None

    def _hashes(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope.get("method") != "POST":
            return False
        if self._paths is None:
            self._paths = frozenset(reverse(name) for name in PASSWORD_PAGES)
        return scope["path"] in self._paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._hashes(scope):
            await self.app(scope, receive, send)
            return
        if self._places is None:  # made on the server's own event loop
            self._places = asyncio.Semaphore(max(1, settings.LOREMASTER_PASSWORD_HASHES_AT_ONCE))
        async with self._places:
            await self.app(scope, receive, send)
