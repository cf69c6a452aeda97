"""The client's address, as the proxy this instance trusts gives it.

Uvicorn runs with `--no-proxy-headers`, so REMOTE_ADDR is the socket's peer.
Without BEHIND_PROXY that is the client, and X-Forwarded-For is the client's
own claim, ignored: keyed on it, a throttle was escaped by sending 35
different values. With BEHIND_PROXY, the peer is our proxy, which appends the
address it saw to X-Forwarded-For; only the hops our own proxies add are
trusted, so the address is the LOREMASTER_TRUSTED_PROXY_HOPS-th from the
right, and anything further left (the client's claim) is never read.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def forwarded_address(header: str, *, hops: int) -> str:
    """The `hops`-th address from the right of an X-Forwarded-For value
    ('' when it is empty); with fewer addresses than hops, the leftmost."""
    addresses = [part.strip() for part in header.split(",") if part.strip()]
    if not addresses:
        return ""
    return addresses[-hops] if len(addresses) >= hops else addresses[0]


def client_address(request: HttpRequest) -> str:
    peer = request.META.get("REMOTE_ADDR", "")
    if not settings.BEHIND_PROXY:
        return peer
    hops = max(1, settings.TRUSTED_PROXY_HOPS)
    return forwarded_address(request.META.get("HTTP_X_FORWARDED_FOR", ""), hops=hops) or peer
