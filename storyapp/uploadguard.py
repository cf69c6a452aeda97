"""Uploads from nobody: a multipart POST without a logged-in session is
answered before its body is read.

Under ASGI Django reads the whole body into a temporary file before any
middleware or view runs, so `login_required` redirected an anonymous 20 MB
upload only after spooling it to disk. This sits in front of Django (in
storyapp/asgi.py) and looks only at the headers and the session the cookie
names; the request's body is never touched. The log-in pages are let
through (their forms are not multipart, but a log-in must never be refused
here). A session that passes still meets `login_required` in the view.
"""

from __future__ import annotations

from http.cookies import SimpleCookie
from importlib import import_module
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.db import connection
from django.urls import reverse

from .limits import Receive, Scope, Send


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return ""


def _session_key(scope: Scope) -> str:
    cookie = SimpleCookie()
    try:
        cookie.load(_header(scope, b"cookie"))
    except Exception:
        return ""
    morsel = cookie.get(settings.SESSION_COOKIE_NAME)
    return morsel.value if morsel else ""


def _signed_in(session_key: str) -> bool:
    """Whether the session names a user; run in a thread of its own, which
    hands its database connection back when done."""
    try:
        store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
        return store.get(SESSION_KEY) is not None
    finally:
        connection.close()


def _exempt(path: str) -> bool:
    return path in {reverse("login"), reverse("admin:login")}


async def _redirect_to_login(scope: Scope, send: Send) -> None:
    location = f"{reverse('login')}?next={quote(scope['path'])}"
    await send({"type": "http.response.start", "status": 302, "headers": [
        (b"location", location.encode()), (b"content-length", b"0"), (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": b""})


class AnonymousUploadGuard:
    """ASGI middleware: see the module docstring."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST"
                and _header(scope, b"content-type").lower().startswith("multipart/")
                and not _exempt(scope["path"])):
            if not await _maybe_signed_in(_session_key(scope)):
                await _redirect_to_login(scope, send)
                return
        await self.app(scope, receive, send)


async def _maybe_signed_in(key: str) -> bool:
    """False only for a request surely anonymous: a session store that
    fails (the database busy) leaves the answer to Django, which says so."""
    if not key:
        return False
    try:
        return await sync_to_async(_signed_in, thread_sensitive=False)(key)
    except Exception:
        return True
