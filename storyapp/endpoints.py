"""Which model endpoints the server may call (the SSRF guard).

Endpoint URLs are typed in by admins, but the server is the one that connects,
so an unchecked URL turns the app into a proxy into whatever network it sits
on. Only hosts on `ENDPOINT_ALLOWLIST` pass; userinfo and other schemes never do.
"""

from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError


def _host_matches(host: str, port: int | None, entry: str) -> bool:
    entry = entry.lower()
    entry_port = None
    if entry.startswith("["):
        bracket_end = entry.index("]")
        entry_host, rest = entry[1:bracket_end], entry[bracket_end + 1 :]
        if rest.startswith(":"):
            entry_port = int(rest[1:])
    elif entry.count(":") == 1:
        entry_host, raw_port = entry.split(":")
        entry_port = int(raw_port)
    else:
        entry_host = entry
    if entry_port is not None and entry_port != port:
        return False
    if entry_host.startswith("*."):
        return host.endswith(entry_host[1:])
    return host == entry_host


def validate_base_url(url: str) -> None:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValidationError(f"Not a valid URL: {exc}.") from exc
    if parts.scheme not in {"http", "https"}:
        raise ValidationError("The base URL must start with http:// or https://.")
    if parts.username or parts.password:
        raise ValidationError("Put the API key in its own field, not in the URL.")
    host = (parts.hostname or "").lower()
    if not host:
        raise ValidationError("The base URL has no host.")
    if not any(_host_matches(host, port, entry) for entry in settings.ENDPOINT_ALLOWLIST):
        allowed = ", ".join(settings.ENDPOINT_ALLOWLIST)
        raise ValidationError(
            f"The host {host} is not on this server's endpoint allowlist ({allowed}). "
            "An operator can extend it with LOREMASTER_ENDPOINT_ALLOWLIST."
        )
