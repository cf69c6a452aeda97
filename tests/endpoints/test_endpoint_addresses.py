"""The endpoint allowlist judges the address each connection goes to, not only the URL's name.

Names are resolved by a table this module controls (`dns`), standing in for
a DNS server an attacker runs: a wildcard name on the list pointed at the
metadata service, at a private address, at loopback where the test server
listens, or at one address and then another (rebinding). `tripwire` lets
connections reach loopback only and records every one, so a test shows where
the client tried to go, and nothing leaves the machine even when the guard
is missing.
"""

import datetime
import http.server
import ipaddress
import logging
import socket
import ssl
import threading

import httpx
import pytest
from django.utils import timezone

from endpoints.client import close_clients
from endpoints.embeddings import EmbeddingUnavailable, embed
from endpoints.errors import ModelFailure
from endpoints.probing import count_on_server, probe_window
from endpoints.streaming import stream_reply
from storyapp import services
from storyapp.models import Action
from tests.factories import CampaignFactory, EndpointProfileFactory

REFUSED = "resolved to an address this server's endpoint allowlist does not allow"


@pytest.fixture
def dns(monkeypatch):
    """`dns["name"] = [["10.0.0.5"], ...]`: each look-up of the name takes the
    next answer, the last one repeating; `dns.asked` lists the names looked up.
    Other names (and IP literals) resolve as usual."""
    real = socket.getaddrinfo

    class Table(dict):
        def __init__(self):
            super().__init__()
            self.asked: list[str] = []

    table = Table()

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        name = host.decode() if isinstance(host, bytes) else host
        if name not in table:
            return real(host, port, family, type, proto, flags)
        table.asked.append(name)
        answers = table[name]
        addresses = answers.pop(0) if len(answers) > 1 else answers[0]
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, int(port), 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, int(port)))
            for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


@pytest.fixture
def tripwire(monkeypatch):
    """The addresses sockets connected to (or tried to); any but loopback is refused here."""
    attempts: list[str] = []
    real_connect = socket.socket.connect

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        attempts.append(host)
        if isinstance(address, tuple) and not ipaddress.ip_address(host.split("%")[0]).is_loopback:
            raise ConnectionRefusedError(f"the test's tripwire: no connection to {host}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return attempts


@pytest.fixture(autouse=True)
def fresh_clients():
    """Every test starts without pooled connections, so each request connects."""
    close_clients()
    yield
    close_clients()


def _profile(model, host="llm.example.test", **fields):
    return EndpointProfileFactory(base_url=f"http://{host}:{model.port}/v1", first_byte_timeout_seconds=3, **fields)


def _narrate(alice, profile, django_capture_on_commit_callbacks, text="I open the door."):
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    with django_capture_on_commit_callbacks(execute=True):
        _, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
    narration.refresh_from_db()
    return narration


def _chat(model):
    return [r for r in model.requests() if r.get("path") == "/v1/chat/completions"]


def _reply(profile) -> str:
    return "".join(
        stream_reply(profile, messages=[{"role": "user", "content": "Go on."}], temperature=0.5, max_tokens=50)
    )


def _assert_hidden(message, profile, *addresses):
    """The reader is told what happened and what an operator can do, in the profile's name."""
    assert REFUSED in message and "LOREMASTER_ENDPOINT_ALLOWLIST" in message
    assert profile.name in message
    for secret in (profile.base_url, "example.test", *addresses):
        assert secret not in message


@pytest.mark.parametrize("address", ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254", "10.0.0.5"])
def test_a_wildcard_name_that_resolves_inward_is_refused_before_any_connection(
    alice, model, dns, tripwire, settings, django_capture_on_commit_callbacks, address
):
    settings.ENDPOINT_ALLOWLIST = ["*.example.test"]
    dns["meta.example.test"] = [[address]]
    profile = _profile(model, host="meta.example.test")
    model.script({"reply": "The door opens."})
    narration = _narrate(alice, profile, django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    _assert_hidden(narration.error, profile, address)
    assert tripwire == [], "no socket connected anywhere: not to the address, not by a fallback"
    assert model.requests() == []


def test_a_name_that_resolves_to_loopback_is_refused_until_loopback_is_listed(
    alice, model, dns, tripwire, settings, django_capture_on_commit_callbacks
):
    settings.ENDPOINT_ALLOWLIST = ["*.example.test"]
    dns["llm.example.test"] = [["127.0.0.1"]]
    profile = _profile(model)
    model.script({"reply": "The door opens."})
    refused = _narrate(alice, profile, django_capture_on_commit_callbacks)
    assert refused.status == Action.Status.FAILED
    _assert_hidden(refused.error, profile, "127.0.0.1")
    assert tripwire == [] and model.requests() == []

    settings.ENDPOINT_ALLOWLIST = ["*.example.test", "127.0.0.1"]
    narration = _narrate(alice, profile, django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.DONE, narration.error
    assert narration.text.startswith("The door opens.")
    assert len(_chat(model)) == 1
    assert set(tripwire) == {"127.0.0.1"}


@pytest.mark.parametrize(
    ("extra", "reaches"),
    [
        ("127.0.0.0/8", True),
        ("127.0.0.1/32", True),
        ("127.0.0.0/8:{port}", True),
        ("::ffff:127.0.0.0/104", True),  # a mapped range is the IPv4 range it names
        ("127.0.0.0/8:1", False),  # pinned to another port
        ("10.0.0.0/8", False),
        ("::1/128", False),
    ],
)
def test_a_cidr_entry_lets_names_and_addresses_reach_what_it_holds(model, dns, tripwire, settings, db, extra, reaches):
    """Through a listed name, and as the base URL's own host (http://127.0.0.1:PORT/v1)."""
    settings.ENDPOINT_ALLOWLIST = ["*.example.test", extra.format(port=model.port)]
    dns["llm.example.test"] = [["127.0.0.1"]]
    named, literal = _profile(model), EndpointProfileFactory(base_url=model.base_url)
    model.script({"reply": "The tide turns."}, {"reply": "The bell rings."})
    if reaches:
        assert _reply(named).startswith("The tide turns.")
        assert _reply(literal).startswith("The bell rings.")
        assert len(_chat(model)) == 2
    else:
        with pytest.raises(ModelFailure) as failure:
            _reply(named)
        _assert_hidden(str(failure.value), named, "127.0.0.1")
        with pytest.raises(ModelFailure, match="not on this server's endpoint allowlist"):
            _reply(literal)
        assert tripwire == [] and model.requests() == []


def test_localhost_still_reaches_the_local_server_and_only_loopback(
    alice, model, dns, tripwire, settings, django_capture_on_commit_callbacks
):
    settings.ENDPOINT_ALLOWLIST = ["localhost", "*.example.test"]
    local = _profile(model, host="localhost")
    model.script({"reply": "The kettle sings."})
    narration = _narrate(alice, local, django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.DONE, narration.error
    assert narration.text.startswith("The kettle sings.")

    # `localhost` may reach loopback; another listed name may not, and
    # `localhost` itself may reach nothing else.
    dns["llm.example.test"] = [["127.0.0.1"]]
    with pytest.raises(ModelFailure, match=REFUSED):
        _reply(_profile(model))
    close_clients()
    dns["localhost"] = [["10.0.0.5"]]
    with pytest.raises(ModelFailure, match=REFUSED):
        _reply(local)
    assert "10.0.0.5" not in tripwire


def test_a_rebound_name_is_connected_at_the_checked_address_and_checked_again_next_time(
    model, dns, tripwire, settings, db
):
    """The name answers 127.0.0.1 (listed), then 10.0.0.5: the connection goes
    to the address that was checked, with no second look-up to swap it, and
    the next connection's look-up is checked on its own."""
    settings.ENDPOINT_ALLOWLIST = ["*.example.test", "127.0.0.1"]
    dns["llm.example.test"] = [["127.0.0.1"], ["10.0.0.5"]]
    profile = _profile(model)
    model.script({"reply": "The lamp is lit."}, {"reply": "Never sent."})
    assert _reply(profile).startswith("The lamp is lit.")
    assert dns.asked == ["llm.example.test"], "one look-up for the connection"
    assert tripwire == ["127.0.0.1"]

    close_clients()  # the next request needs a new connection, as after a keep-alive expires
    with pytest.raises(ModelFailure) as failure:
        _reply(profile)
    _assert_hidden(str(failure.value), profile, "10.0.0.5")
    assert tripwire == ["127.0.0.1"], "nothing connected to the rebound address"
    assert len(_chat(model)) == 1


def test_a_mixed_answer_is_refused_whole(model, dns, tripwire, settings, db):
    """A public-looking name that also answers an internal address is refused
    before any connection: a client that fell back from the first address to
    the next would reach the internal one."""
    settings.ENDPOINT_ALLOWLIST = ["*.example.test", "127.0.0.1"]
    dns["llm.example.test"] = [["127.0.0.1", "169.254.169.254"]]
    with pytest.raises(ModelFailure, match=REFUSED):
        _reply(_profile(model))
    assert tripwire == [] and model.requests() == []


def test_the_operators_log_names_the_address_the_reader_never_sees_it(model, dns, tripwire, settings, db, caplog):
    settings.ENDPOINT_ALLOWLIST = ["*.example.test"]
    dns["meta.example.test"] = [["169.254.169.254"]]
    profile = _profile(model, host="meta.example.test")
    with caplog.at_level(logging.WARNING, logger="endpoints.netguard"), pytest.raises(ModelFailure) as failure:
        _reply(profile)
    _assert_hidden(str(failure.value), profile, "169.254.169.254")
    logged = " ".join(r.getMessage() for r in caplog.records if r.name == "endpoints.netguard")
    assert "meta.example.test" in logged and "169.254.169.254" in logged


def test_embeddings_and_probes_go_through_the_same_check(model, dns, tripwire, settings, db):
    settings.ENDPOINT_ALLOWLIST = ["*.example.test"]
    dns["llm.example.test"] = [["10.0.0.5"]]
    profile = _profile(model)
    with pytest.raises(EmbeddingUnavailable) as failure:
        list(embed(profile, ["The lighthouse."]))
    _assert_hidden(str(failure.value), profile, "10.0.0.5")
    window = probe_window(profile)
    assert window.source == "unreachable"
    assert count_on_server(profile, "The lighthouse.") is None
    assert tripwire == [] and model.requests() == []


# ------------------------------------------------------------ https: connecting to the IP keeps TLS on the name


def _certificate(name: str):
    """A self-signed certificate for `name`, as (cert PEM, key PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@pytest.fixture
def tls_server(tmp_path):
    """An https server on 127.0.0.1 whose certificate is for llm.example.test;
    yields (port, the trusting client context, the SNI names it was sent)."""
    cert_pem, key_pem = _certificate("llm.example.test")
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    server_names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    context.sni_callback = lambda sock, name, ctx: server_names.append(name)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd.server_address[1], ssl.create_default_context(cadata=cert_pem.decode()), server_names
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("stack", ["openai", "probe"])
def test_https_checks_the_certificate_against_the_name_not_the_address(dns, tripwire, settings, tls_server, stack):
    import httpx2

    from endpoints import netguard

    port, trusting, server_names = tls_server
    settings.ENDPOINT_ALLOWLIST = ["*.example.test", "127.0.0.1"]
    dns["llm.example.test"] = [["127.0.0.1"]]
    dns["other.example.test"] = [["127.0.0.1"]]
    if stack == "openai":
        client, failure = httpx2.Client(transport=netguard.openai_transport(ssl_context=trusting)), httpx2.ConnectError
    else:
        client, failure = httpx.Client(transport=netguard.probe_transport(ssl_context=trusting)), httpx.ConnectError
    with client:
        assert client.get(f"https://llm.example.test:{port}/").text == "ok"
        assert server_names == ["llm.example.test"], "the name, not 127.0.0.1, went out as the SNI"
        with pytest.raises(failure) as mismatch:
            client.get(f"https://other.example.test:{port}/")
    assert "certificate verify failed" in str(mismatch.value) and "mismatch" in str(mismatch.value).lower()
