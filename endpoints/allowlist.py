"""Which model endpoints the server may call (the SSRF guard).

Endpoint URLs are typed in by admins, but the server is the one that connects,
so an unchecked URL turns the app into a proxy into whatever network it sits
on. Only hosts on `ENDPOINT_ALLOWLIST` pass; userinfo and other schemes never do.

A name on the list is not enough: `*.example.com` lets anyone who controls a
subdomain point it at 169.254.169.254 or 10.0.0.5, and a name can resolve to a
public address when the URL is saved and to an internal one when the server
connects (DNS rebinding). So the address is judged too, at connect time, on
the address actually connected to (`endpoints.netguard` resolves once and
connects to exactly the address `address_allowed` passed). The rule:

1. an address that is itself listed (an IP entry, or a CIDR entry such as
   `10.0.0.0/8` or `fd00::/8`) is allowed;
2. a public address reached through a listed name is allowed;
3. the exact entry `localhost` may reach loopback, and nothing else may be
   reached through a name: loopback, private, link-local (the cloud metadata
   service), reserved, multicast and unspecified addresses pass only when
   listed themselves.

IPv4 inside IPv6 (`::ffff:10.0.0.5`, NAT64's `64:ff9b::/96`, 6to4) is judged
as the IPv4 address it carries.
"""

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class Entry:
    """One allowlist entry: a name (`*.` for subdomains) or a network, and
    the port it is pinned to, if any."""

    host: str
    port: int | None
    network: IPNetwork | None

    def port_matches(self, port: int | None) -> bool:
        return self.port is None or self.port == port

    def name_matches(self, host: str) -> bool:
        if self.network is not None:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host

    def holds(self, address: IPAddress) -> bool:
        return self.network is not None and self.network.version == address.version and address in self.network


def parse_entry(entry: str) -> Entry:
    """`host`, `host:port`, `[v6]:port`, `*.domain`, `10.0.0.0/8`, `fd00::/8`."""
    entry = entry.strip().lower()
    port = None
    if entry.startswith("["):
        bracket_end = entry.index("]")
        host, rest = entry[1:bracket_end], entry[bracket_end + 1 :]
        if rest.startswith(":"):
            port = int(rest[1:])
    elif entry.count(":") == 1:
        host, raw_port = entry.split(":")
        port = int(raw_port)
    else:
        host = entry
    try:
        network = ipaddress.ip_network(host, strict=False)
    except ValueError:
        network = None
    if network is not None:
        network = _judged_network(network)
    return Entry(host, port, network)


def allowlist() -> list[Entry]:
    """`ENDPOINT_ALLOWLIST`, parsed; read at each call, so a narrowed list applies to the next connection."""
    return [parse_entry(entry) for entry in settings.ENDPOINT_ALLOWLIST if entry.strip()]


def judged(address: IPAddress) -> IPAddress:
    """The address a connection really reaches: IPv4 carried in IPv6 is its IPv4."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def _judged_network(network: IPNetwork) -> IPNetwork:
    """A listed `::ffff:a.b.c.d/…` network, as the IPv4 network it names."""
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            return ipaddress.IPv4Network(f"{mapped}/{network.prefixlen - 96}")
    return network


def _ip(host: str) -> IPAddress | None:
    try:
        return judged(ipaddress.ip_address(host))
    except ValueError:
        return None


def is_public(address: IPAddress) -> bool:
    """Globally routable unicast: what a name may reach without being listed."""
    return address.is_global and not (
        address.is_private or address.is_loopback or address.is_link_local or address.is_reserved
        or address.is_multicast or address.is_unspecified
    )


def host_allowed(host: str, port: int | None, entries: list[Entry]) -> bool:
    """Whether the URL's host (a name or an IP literal) is on the list."""
    host = host.lower()
    ip = _ip(host)
    listed = [entry for entry in entries if entry.port_matches(port)]
    if ip is not None:
        return any(entry.holds(ip) for entry in listed)
    return any(entry.name_matches(host) for entry in listed)


def address_allowed(host: str, port: int, address: str, entries: list[Entry]) -> bool:
    """Whether connecting to `address` for `host` is allowed (the module's rule)."""
    ip = _ip(address)
    if ip is None:
        return False
    host = host.lower()
    listed = [entry for entry in entries if entry.port_matches(port)]
    if any(entry.holds(ip) for entry in listed):
        return True
    if _ip(host) is not None:
        # An IP literal is its own address; it passes only when listed.
        return False
    names = [entry for entry in listed if entry.name_matches(host)]
    if not names:
        return False
    if is_public(ip):
        return True
    return ip.is_loopback and any(entry.host == "localhost" for entry in names)


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
    if not host_allowed(host, port, allowlist()):
        allowed = ", ".join(settings.ENDPOINT_ALLOWLIST)
        raise ValidationError(
            f"The host {host} is not on this server's endpoint allowlist ({allowed}). "
            "An operator can extend it with LOREMASTER_ENDPOINT_ALLOWLIST."
        )
