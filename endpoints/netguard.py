"""HTTP transports that check the address they connect to (the SSRF guard's second half).

`allowlist.validate_base_url` checks the URL's host name; what the name
resolves to is only known when the connection is made, and may change
between two look-ups (DNS rebinding). So the transports here resolve the name
once, judge every address it gave with `allowlist.address_allowed`, and then
connect to exactly those addresses, never to the name, so no second look-up
can swap in another. TLS still runs on the name: httpcore hands the name to
`start_tls` as the SNI and the name the certificate must match, whatever
address the socket went to.

Every client that talks to a model endpoint is built on one of these:
`openai_transport()` for the openai SDK's clients (it runs on httpx2 and
httpcore2), `probe_transport()` for the plain httpx client of the probes.
Neither takes a proxy from the environment: a proxy would make the
connection, and resolve the name, where this check cannot see.
"""

from __future__ import annotations

import logging
import socket

import httpcore
import httpcore2
import httpx
import httpx2
import openai

from django.conf import settings

from . import allowlist, replycap

log = logging.getLogger(__name__)


class AddressRefused(Exception):
    """The endpoint's host resolved to an address the allowlist does not allow.

    The message is for logs and tracebacks and names no address; `host`,
    `port` and `addresses` say what was refused. Raised as httpcore's own
    ConnectError, so every caller that handles "could not connect" handles
    this too; `describe` finds it in the exception's causes."""

    def __init__(self, host: str, port: int, addresses: list[str]):
        super().__init__("The endpoint's host resolved to an address the endpoint allowlist does not allow.")
        self.host, self.port, self.addresses = host, port, addresses


class _Refused(AddressRefused, httpcore.ConnectError):
    pass


class _Refused2(AddressRefused, httpcore2.ConnectError):
    pass


def refusal_in(exc: BaseException | None) -> AddressRefused | None:
    """The AddressRefused behind `exc` (httpx and openai wrap it), or None."""
    for _ in range(10):
        if exc is None or isinstance(exc, AddressRefused):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


class GuardedBackend:
    """A network backend (httpcore's interface) around `inner` that connects
    only to checked addresses.

    1. Resolve the host once (`socket.getaddrinfo`).
    2. Judge every address it gave; if any is not allowed, refuse the whole
       answer before connecting anywhere (a mixed answer is a rebinding trick:
       the public address fails, the client falls back to the internal one).
    3. Connect to each address in turn, as the IP literal, until one answers.
    """

    def __init__(self, inner, refused: type[AddressRefused], connect_error: type[Exception]):
        self._inner = inner
        self._refused = refused
        self._connect_error = connect_error

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:  # as httpcore's own backend: no such name is a connect error
            raise self._connect_error(str(exc)) from exc
        addresses = list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in answers))
        entries = allowlist.allowlist()
        refused = [a for a in addresses if not allowlist.address_allowed(host, port, a, entries)]
        if refused or not addresses or not allowlist.host_allowed(host, port, entries):
            log.warning(
                "Refused to connect to %s port %s: it resolved to %s, and the endpoint allowlist does not allow %s. "
                "List the address or its range in LOREMASTER_ENDPOINT_ALLOWLIST if it is meant to be reached.",
                host, port, ", ".join(addresses) or "nothing", ", ".join(refused) or "the host",
            )
            raise self._refused(host, port, addresses)
        failure: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except self._connect_error as exc:
                failure = exc
        raise failure

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise self._connect_error("Model endpoints are reached over TCP only.")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _ProbeTransport(httpx.HTTPTransport):
    def __init__(self, *, limits: httpx.Limits, ssl_context=None):
        ssl_context = ssl_context or httpx.create_ssl_context()
        super().__init__(verify=ssl_context, limits=limits)
        # The pool `super()` builds, again, with the guarded backend:
        # httpcore takes a network backend only in the pool's constructor.
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(httpcore.SyncBackend(), _Refused, httpcore.ConnectError),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """The reply, its body bounded by the probes' cap (replycap)."""
        replycap.ask_uncompressed(request)
        return replycap.capped(
            super().handle_request(request), path=request.url.path,
            limit=settings.LOREMASTER_PROBE_MAX_BYTES, too_large=replycap.ProbeReplyTooLarge,
        )


class _OpenAITransport(httpx2.HTTPTransport):
    def __init__(self, *, limits: httpx2.Limits, ssl_context=None):
        ssl_context = ssl_context or httpx2.create_ssl_context()
        super().__init__(verify=ssl_context, limits=limits)
        self._pool = httpcore2.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(httpcore2.SyncBackend(), _Refused2, httpcore2.ConnectError),
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """The reply, its body bounded by the model replies' cap (replycap)."""
        replycap.ask_uncompressed(request)
        return replycap.capped(
            super().handle_request(request), path=request.url.path,
            limit=settings.LOREMASTER_MODEL_REPLY_MAX_BYTES, too_large=replycap.ModelReplyTooLarge,
        )


#: httpx's own default pool limits, which a client given a transport no longer applies.
PROBE_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


def probe_transport(*, ssl_context=None) -> httpx.HTTPTransport:
    """For an `httpx.Client(transport=...)`; `ssl_context` replaces the default trust store."""
    return _ProbeTransport(limits=PROBE_LIMITS, ssl_context=ssl_context)


def openai_transport(*, ssl_context=None) -> httpx2.HTTPTransport:
    """For `openai.DefaultHttpxClient(transport=...)`, with the SDK's own pool limits;
    `ssl_context` replaces the default trust store."""
    return _OpenAITransport(limits=openai.DEFAULT_CONNECTION_LIMITS, ssl_context=ssl_context)
