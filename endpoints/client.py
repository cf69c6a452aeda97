"""One HTTP client per endpoint profile, and which profile a campaign uses.

Every request to a model server goes through here: the openai client of a
profile (`client_for`) or the plain JSON request of a probe (`http_json`),
each re-checking the allowlist at call time and connecting through the
guarded transports (netguard).
"""

from __future__ import annotations

import atexit
import threading

import httpx
import openai

from . import netguard
from .allowlist import validate_base_url
from .models import EndpointProfile


def endpoint_for(campaign) -> EndpointProfile | None:
    """The campaign's profile, or the default one when it picked none.
    `campaign` is anything with the `endpoint` foreign key (a storyapp
    Campaign); this layer never imports the story's models."""
    if campaign.endpoint_id is not None:
        return campaign.endpoint
    return EndpointProfile.objects.filter(is_default=True).order_by("id").first()


#: One client per endpoint profile per process: building one costs about
#: 25 ms (an SSL context, a connection pool), and its pool keeps the
#: connection to the model server open between turns. Replaced when the
#: profile's address or key changes; closed when the process exits.
_clients: dict[int | None, tuple[tuple, openai.OpenAI]] = {}
_clients_lock = threading.Lock()
_probe_http: httpx.Client | None = None


def client_for(profile: EndpointProfile, *, timeout: float | None = None) -> openai.OpenAI:
    """The profile's client. `timeout` bounds the wait for the response's
    first byte (and any silence after it); the default is the profile's
    first-byte timeout. The total for a streamed reply is enforced by
    `streaming.stream_reply`."""
    # Checked again at call time: the allowlist may have narrowed since the
    # profile was saved.
    validate_base_url(profile.base_url)
    seconds = float(timeout if timeout is not None else profile.first_byte_timeout_seconds)
    identity = (profile.base_url, profile.api_key_encrypted)
    with _clients_lock:
        cached = _clients.get(profile.pk)
        if cached is None or cached[0] != identity:
            if cached is not None:
                cached[1].close()
            cached = identity, openai.OpenAI(
                base_url=profile.base_url, api_key=profile.api_key or "not-needed", max_retries=0,
                # Never follow a redirect: the allowlist checks the base URL,
                # and a 307 from an allowed server would carry the whole
                # prompt, hidden lore included, to a host it never checked.
                # The transport checks the address each connection goes to.
                http_client=openai.DefaultHttpxClient(follow_redirects=False, transport=netguard.openai_transport()),
            )
            _clients[profile.pk] = cached
    return cached[1].with_options(timeout=httpx.Timeout(seconds, connect=min(10.0, seconds)))


@atexit.register
def close_clients() -> None:
    global _probe_http
    with _clients_lock:
        for _, client in _clients.values():
            client.close()
        _clients.clear()
        if _probe_http is not None:
            _probe_http.close()
            _probe_http = None


#: Each probe is one short request; a server that does not know the route
#: answers 404 at once, and a dead one fails the first probe's connect.
PROBE_TIMEOUT = httpx.Timeout(5.0, connect=3.0)


def server_root(profile: EndpointProfile) -> str:
    """The server's own address: the OpenAI base URL without its `/v1`."""
    base = profile.base_url.strip().rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def http_json(profile: EndpointProfile, method: str, url: str, payload: dict | None = None, timeout=PROBE_TIMEOUT):
    """One JSON request to the profile's server; None unless it answered 200
    with JSON. Connection errors propagate: the server is not there."""
    global _probe_http
    validate_base_url(url)
    headers = {"Authorization": f"Bearer {profile.api_key}"} if profile.has_api_key else {}
    with _clients_lock:
        if _probe_http is None:
            # One pool for every probe: a new client costs an SSL context.
            _probe_http = httpx.Client(follow_redirects=False, transport=netguard.probe_transport())
    response = _probe_http.request(method, url, json=payload, headers=headers, timeout=timeout)
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None
