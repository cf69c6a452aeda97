"""Limits on what a client may make the server do: request bodies (log-in
attempts are storyapp.logins').

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

from collections.abc import Awaitable, Callable

from django.conf import settings
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

