"""Every request body is bounded before Django buffers it (issue 13, finding 3).

The tests drive the ASGI application uvicorn serves, with a hand-written
receive that counts what the server pulled from the client."""

import asyncio

from django.conf import settings

from storyapp.asgi import application

MB = 1024 * 1024


class Client:
    """One ASGI request: `chunks` bodies of `chunk` bytes, then the end (or never, if endless)."""

    def __init__(self, *, chunks: int, chunk: int = MB, endless: bool = False):
        self.left, self.chunk, self.endless = chunks, chunk, endless
        self.pulled = 0
        self.sent: list[dict] = []

    async def receive(self):
        if self.left == 0 and not self.endless:
            await asyncio.Event().wait()  # the client waits for its answer
        self.pulled += 1
        self.left -= 1
        return {"type": "http.request", "body": b"x" * self.chunk,
                "more_body": self.endless or self.left > 0}

    async def send(self, message):
        self.sent.append(message)

    @property
    def status(self):
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")


def post(path: str, client: Client, *, length: int | None, content_type: bytes = b"application/x-www-form-urlencoded",
         extra_headers: list[tuple[bytes, bytes]] = ()):
    headers = [(b"host", b"localhost"), (b"content-type", content_type), *extra_headers]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": headers, "client": ("127.0.0.1", 5000), "server": ("localhost", 8000)}
    asyncio.run(asyncio.wait_for(application(scope, client.receive, client.send), timeout=30))
    return client


def test_an_oversized_content_length_is_refused_before_the_body_is_read():
    client = post("/accounts/login/", Client(chunks=300), length=300 * MB)
    assert client.status == 413
    assert client.pulled == 0


def test_the_upload_url_refuses_past_the_upload_limit_unread():
    limit = settings.KNOWLEDGE_MAX_REQUEST_BYTES
    client = post("/campaigns/1/library/upload/", Client(chunks=300), length=limit + 1,
                  content_type=b"multipart/form-data; boundary=x")
    assert client.status == 413
    assert client.pulled == 0


def test_a_streamed_body_is_cut_off_once_past_the_limit():
    client = post("/accounts/login/", Client(chunks=0, endless=True), length=None)
    assert client.status == 413
    assert client.pulled <= settings.REQUEST_MAX_BODY_BYTES // MB + 1
    assert [m["type"] for m in client.sent] == ["http.response.start", "http.response.body"]


def test_an_upload_within_the_upload_limit_reaches_django():
    """Over the ordinary limit but within the upload one: Django answers
    (an anonymous reader is sent to log in), not the body limit."""
    size = settings.REQUEST_MAX_BODY_BYTES + MB
    assert size < settings.KNOWLEDGE_MAX_REQUEST_BYTES
    client = post("/campaigns/1/library/upload/", Client(chunks=size // MB), length=size,
                  content_type=b"multipart/form-data; boundary=x")
    assert client.status == 302


def test_a_small_post_reaches_django():
    client = post("/accounts/login/", Client(chunks=1, chunk=100), length=100)
    assert client.status == 403  # no CSRF token: Django's answer, not the limit's
