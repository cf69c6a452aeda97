"""The endpoint allowlist's rule for addresses, as a pure function of host, port, address and entries."""

import pytest
from django.core.exceptions import ValidationError

from endpoints.allowlist import address_allowed, parse_entry, validate_base_url

DEFAULT = ["127.0.0.1", "localhost", "[::1]", "api.openai.com"]


def _allowed(host, address, entries, port=8000):
    return address_allowed(host, port, address, [parse_entry(e) for e in entries])


@pytest.mark.parametrize(
    ("host", "address", "entries"),
    [
        ("api.openai.com", "162.159.140.245", DEFAULT),  # a public address through a listed name
        ("llm.example.com", "2606:4700::6810:85e5", ["*.example.com"]),
        ("localhost", "127.0.0.1", ["localhost"]),  # the one name that may reach loopback
        ("localhost", "::1", ["localhost"]),
        ("127.0.0.1", "127.0.0.1", DEFAULT),  # an IP literal that is listed
        ("::1", "::1", DEFAULT),
        ("llm.example.com", "127.0.0.1", ["*.example.com", "127.0.0.1"]),  # listed address behind a name
        ("llm.example.com", "10.0.0.5", ["*.example.com", "10.0.0.0/8"]),
        ("llm.example.com", "fd00::5", ["*.example.com", "fd00::/8"]),
        ("llm.example.com", "::ffff:10.0.0.5", ["*.example.com", "10.0.0.0/8"]),  # judged as its IPv4
        ("10.1.2.3", "10.1.2.3", ["10.0.0.0/8:8000"]),  # a CIDR entry pinned to the port
        ("llm.example.com", "169.254.169.254", ["*.example.com", "169.254.169.254"]),  # listed on purpose
    ],
)
def test_allowed_addresses(host, address, entries):
    assert _allowed(host, address, entries)


@pytest.mark.parametrize(
    ("host", "address", "entries"),
    [
        ("llm.example.com", "169.254.169.254", ["*.example.com"]),  # the metadata service (link-local)
        ("llm.example.com", "fd00:ec2::254", ["*.example.com"]),  # its IPv6 address (unique local)
        ("llm.example.com", "::ffff:169.254.169.254", ["*.example.com"]),  # mapped IPv4 is judged as IPv4
        ("llm.example.com", "64:ff9b::a9fe:a9fe", ["*.example.com"]),  # NAT64 of 169.254.169.254
        ("llm.example.com", "10.0.0.5", ["*.example.com"]),
        ("llm.example.com", "192.168.1.10", ["*.example.com"]),
        ("llm.example.com", "100.64.0.1", ["*.example.com"]),  # carrier-grade NAT, not public
        ("llm.example.com", "127.0.0.1", ["*.example.com"]),
        ("llm.example.com", "127.0.0.1", ["*.example.com", "localhost"]),  # `localhost` is not a class of names
        ("llm.example.com", "::1", ["*.example.com"]),
        ("llm.example.com", "0.0.0.0", ["*.example.com"]),
        ("llm.example.com", "224.0.1.1", ["*.example.com"]),  # multicast is "global" to Python, not to us
        ("llm.example.com", "240.0.0.1", ["*.example.com"]),  # reserved
        ("localhost", "10.0.0.5", ["localhost"]),  # localhost reaches loopback only
        ("localhost", "8.8.8.8", ["127.0.0.1"]),  # the name itself is not listed
        ("evil.example.org", "8.8.8.8", ["*.example.com"]),
        ("10.1.2.3", "10.1.2.3", ["10.0.0.0/8:9000"]),  # the wrong port
        ("8.8.8.8", "8.8.8.8", ["*.example.com"]),  # a public IP literal must be listed itself
        ("llm.example.com", "10.0.0.5", ["*.example.com", "10.0.0.0/8:9000"]),
    ],
)
def test_refused_addresses(host, address, entries):
    assert not _allowed(host, address, entries)


@pytest.mark.parametrize(
    ("url", "entries"),
    [
        ("http://10.1.2.3:8000/v1", ["10.0.0.0/8"]),
        ("http://10.1.2.3:8000/v1", ["10.0.0.0/8:8000"]),
        ("http://[fd00::5]:8000/v1", ["fd00::/8"]),
        ("http://[fd00::5]:8000/v1", ["[fd00::/8]:8000"]),
        ("http://[::ffff:10.1.2.3]/v1", ["10.0.0.0/8"]),
        ("http://[0:0:0:0:0:0:0:1]:8000/v1", ["[::1]"]),  # IPs compare as addresses, not text
    ],
)
def test_the_base_url_may_be_an_address_in_a_listed_range(settings, url, entries):
    settings.ENDPOINT_ALLOWLIST = entries
    validate_base_url(url)


@pytest.mark.parametrize(
    ("url", "entries"),
    [
        ("http://11.1.2.3:8000/v1", ["10.0.0.0/8"]),
        ("http://10.1.2.3:9000/v1", ["10.0.0.0/8:8000"]),
        ("http://[fe80::1]/v1", ["fd00::/8"]),
        ("http://10.example.com/v1", ["10.0.0.0/8"]),  # a range never matches a name
    ],
)
def test_a_base_url_outside_the_listed_ranges_is_refused(settings, url, entries):
    settings.ENDPOINT_ALLOWLIST = entries
    with pytest.raises(ValidationError, match="not on this server's endpoint allowlist"):
        validate_base_url(url)
