"""Every reply from a model server is read up to a byte cap, never in full.

A server is an address an admin typed in, and what answers there may be
hostile: a 300 MB `/props` read in full costs seconds and most of a
gigabyte, in the web process (Test connection) or the worker (the pre-turn
probe). So the guarded transports (netguard) hand back a body that stops
at the cap and raises ReplyTooLarge there: a Content-Length over it is
refused before any of the body is read. Replies are asked for
uncompressed, and one compressed anyway is refused: inflated after the
cap's count, a gzip bomb would pass it.

The probes' cap is LOREMASTER_PROBE_MAX_BYTES; the model's replies
(narrations, summaries, embeddings: anything the openai client reads) have
LOREMASTER_MODEL_REPLY_MAX_BYTES.
"""

from __future__ import annotations

import httpx
import httpx2


class ReplyTooLarge(Exception):
    """The server's reply passed the cap; the message is for the page and names
    the route and the cap, never the address. Raised as the HTTP client's own
    ReadError (subclasses below), so every caller that handles a dropped
    connection handles this too; `too_large_in` finds it behind the wrappers."""

    def __init__(self, path: str, limit: int, *, compressed: bool = False):
        self.path, self.limit, self.compressed = path, limit, compressed
        if compressed:
            message = f"the server compressed its reply to {path} though it was asked not to, so it was not read"
        else:
            message = f"the server's reply to {path} is larger than {size_text(limit)}, so it was not read"
        super().__init__(message)


class ProbeReplyTooLarge(ReplyTooLarge, httpx.ReadError):
    """A probe's reply (the probes' httpx client)."""


class ModelReplyTooLarge(ReplyTooLarge, httpx2.ReadError):
    """A model reply (the openai client runs on httpx2)."""


def too_large_in(exc: BaseException | None) -> ReplyTooLarge | None:
    """The ReplyTooLarge behind `exc` (openai wraps it), or None."""
    for _ in range(10):
        if exc is None or isinstance(exc, ReplyTooLarge):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def size_text(limit: int) -> str:
    """A cap as the pages print sizes (1 MB = 1,048,576 bytes)."""
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if limit >= scale:
            return f"{limit / scale:.3g} {unit}"
    return f"{limit} bytes"


def ask_uncompressed(request) -> None:
    """Before sending: the reply's bytes are what the cap counts."""
    request.headers["Accept-Encoding"] = "identity"


def capped(response, *, path: str, limit: int, too_large: type[ReplyTooLarge]):
    """The response with its body bounded to `limit` bytes (httpx's or
    httpx2's; `too_large` is that library's subclass)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    length = response.headers.get("content-length", "")
    if encoding not in ("", "identity") or (length.isdigit() and int(length) > limit):
        response.stream.close()
        raise too_large(path, limit, compressed=encoding not in ("", "identity"))
    response.stream = _CappedStream(response.stream, path=path, limit=limit, too_large=too_large)
    return response


class _CappedStream(httpx.SyncByteStream, httpx2.SyncByteStream):
    """A response body that raises once it has passed `limit` bytes, and
    closes the connection under it."""

    def __init__(self, inner, *, path: str, limit: int, too_large: type[ReplyTooLarge]):
        self._inner, self._path, self._limit, self._too_large = inner, path, limit, too_large

    def __iter__(self):
        read = 0
        for part in self._inner:
            read += len(part)
            if read > self._limit:
                self.close()
                raise self._too_large(self._path, self._limit)
            yield part

    def close(self) -> None:
        self._inner.close()
