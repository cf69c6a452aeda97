"""Limits on what a client may make the server do: request bodies, and log-in attempts.

Request bodies: under ASGI Django reads the whole body into a temporary file
before any middleware or view runs, and uvicorn sets no limit of its own, so
a size check in a view comes too late (a 300 MB POST to the login page was
read in full before the 403). `BodyLimit` sits in front of Django, in
`storyapp/asgi.py`, and refuses with 413:

1. a request whose Content-Length is over its limit, before reading a byte;
2. a streamed (chunked) body, as soon as the bytes received pass the limit,
   telling Django the client went away so it stops reading and answers nothing.

The upload views may carry `KNOWLEDGE_MAX_REQUEST_BYTES` (which already
allows for the multipart overhead around the files); every other path
`REQUEST_MAX_BODY_BYTES`, a little over what Django accepts as form data.
"""

import hashlib
from collections.abc import Awaitable, Callable

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.urls import Resolver404, resolve

Scope = dict
Message = dict
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

UPLOAD_VIEWS = frozenset({"library_upload", "campaign_import", "campaign_from_card"})


def body_limit_for(path: str) -> int:
    """The most bytes a request to `path` may carry."""
    try:
        name = resolve(path).url_name
    except Resolver404:
        name = None
    if name in UPLOAD_VIEWS:
        return settings.KNOWLEDGE_MAX_REQUEST_BYTES
    return settings.REQUEST_MAX_BODY_BYTES


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send, limit: int) -> None:
    body = (f"Request body too large: this address accepts at most {limit:,} bytes.\n").encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: bounds every HTTP request body (see the module docstring)."""

    def __init__(self, app, *, limit_for: Callable[[str], int] = body_limit_for):
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, limit)
            return

        received = 0
        started = False
        refused = False

        async def limited_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    if not started:
                        await _refuse(send, limit)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = True
            await send(message)

        await self.app(scope, limited_receive, guarded_send)


# ---------------------------------------------------------------- log-ins
# Wrong passwords for one username from one address: after this many within
# the window, every attempt (the right password too) is refused for the
# lockout. In the cache, which is Redis when hosted, so all web processes
# count together.
LOGIN_FAILURES_ALLOWED = 5
LOGIN_WINDOW_SECONDS = 15 * 60
LOGIN_LOCKOUT_SECONDS = 15 * 60
LOGIN_LOCKED_MESSAGE = (f"Too many failed log-ins for this username from your address. "
                        f"Try again in {LOGIN_LOCKOUT_SECONDS // 60} minutes.")


def _login_key(kind: str, username: str, address: str) -> str:
    digest = hashlib.sha256(f"{username.casefold()}\0{address}".encode()).hexdigest()
    return f"login-{kind}:{digest}"


def login_locked(*, username: str, address: str) -> bool:
    return bool(cache.get(_login_key("lock", username, address)))


def login_failed(*, username: str, address: str) -> None:
    """Counts one wrong password; the last one allowed locks the pair out."""
    key = _login_key("failures", username, address)
    cache.add(key, 0, LOGIN_WINDOW_SECONDS)
    try:
        failures = cache.incr(key)
    except ValueError:  # the window ended between add and incr
        cache.set(key, failures := 1, LOGIN_WINDOW_SECONDS)
    if failures >= LOGIN_FAILURES_ALLOWED:
        cache.set(_login_key("lock", username, address), True, LOGIN_LOCKOUT_SECONDS)
        cache.delete(key)


def login_succeeded(*, username: str, address: str) -> None:
    cache.delete(_login_key("failures", username, address))


class ThrottledAuthenticationForm(AuthenticationForm):
    """The login form, refusing a username and address locked out by failed attempts."""

    def clean(self):
        who = {"username": self.cleaned_data.get("username") or "",
               "address": self.request.META.get("REMOTE_ADDR", "") if self.request else ""}
        if login_locked(**who):
            raise ValidationError(LOGIN_LOCKED_MESSAGE, code="throttled")
        try:
            cleaned = super().clean()
        except ValidationError as error:
            if error.code == "invalid_login":
                login_failed(**who)
            raise
        login_succeeded(**who)
        return cleaned
