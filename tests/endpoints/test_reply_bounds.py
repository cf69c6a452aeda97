"""Replies from a model server are read up to a byte cap (issue 23, finding
10): a hostile server's flood on a probe route, a model list, a narration
stream or an embedding reply fails with a message naming the cap, and the
client stops reading long before the flood ends.

The hostile server is a small loopback HTTP server that writes a body of
`FLOOD` bytes in pieces and counts what it managed to write; the caps are
set small so the tests stay fast (the behaviour is the same at 1 MB).
"""

import collections
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

from endpoints import probing
from endpoints.embeddings import EmbeddingFailed, embed
from endpoints.errors import ModelFailure
from endpoints.streaming import stream_reply
from tests.factories import EndpointProfileFactory

FLOOD = 64 * 1024 * 1024
PIECE = 64 * 1024
CAP = 128 * 1024


class _Flood(BaseHTTPRequestHandler):
    """Answers every route with `FLOOD` bytes: JSON-looking padding, or for a
    stream, server-sent events that never finish."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.accept_encoding.append(self.headers.get("Accept-Encoding"))
        how = self.server.how
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if body.get("stream") else "application/json")
        if how == "declared":
            self.send_header("Content-Length", str(FLOOD))
        if how == "gzip":
            data = gzip.compress(b" " * (8 * 1024 * 1024))
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.end_headers()
        event = b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{}}]}\n\n'
        piece = event * (PIECE // len(event)) if body.get("stream") else b" " * PIECE
        try:
            if not body.get("stream"):
                self.wfile.write(b'{"padding": "')
            while self.server.sent[self.path] < FLOOD:
                self.wfile.write(piece)
                self.server.sent[self.path] += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_GET = do_POST = _answer


@pytest.fixture
def flood():
    """The hostile server; `flood.how` is "" (no length), "declared" (a
    Content-Length of FLOOD) or "gzip" (a compressed reply)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    httpd.how, httpd.sent, httpd.accept_encoding = "", collections.Counter(), []
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def small_caps(settings):
    settings.LOREMASTER_PROBE_MAX_BYTES = CAP
    settings.LOREMASTER_MODEL_REPLY_MAX_BYTES = CAP


def test_a_flood_on_props_fails_the_probe_naming_the_route_and_the_cap(db, flood, small_caps):
    found = probing.probe_window(EndpointProfileFactory(base_url=flood.base_url))
    assert found.tokens is None and found.source == "reply too large"
    assert found.detail == "the server's reply to /props is larger than 128 KB, so it was not read (not verified)"
    assert flood.sent["/props"] < FLOOD / 4
    assert flood.accept_encoding == ["identity"]


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_read(db, flood, small_caps):
    flood.how = "declared"
    found = probing.probe_window(EndpointProfileFactory(base_url=flood.base_url))
    assert "larger than 128 KB" in found.detail
    assert flood.sent["/props"] < FLOOD / 4


def test_a_compressed_reply_is_refused_not_inflated(db, flood, small_caps):
    flood.how = "gzip"
    found = probing.probe_window(EndpointProfileFactory(base_url=flood.base_url))
    assert found.detail.startswith("the server compressed its reply to /props though it was asked not to")


def test_the_default_probe_cap_is_one_megabyte(db, flood, settings):
    assert settings.LOREMASTER_PROBE_MAX_BYTES == 1024 * 1024
    found = probing.probe_window(EndpointProfileFactory(base_url=flood.base_url))
    assert "larger than 1 MB" in found.detail


def test_a_flood_of_a_narration_stream_fails_the_turn_naming_the_cap(db, flood, small_caps):
    profile = EndpointProfileFactory(base_url=flood.base_url, name="Hostile")
    with pytest.raises(ModelFailure) as caught:
        list(stream_reply(profile, messages=[{"role": "user", "content": "Go on."}], temperature=0.7, max_tokens=50))
    assert "Loremaster stopped reading the model endpoint “Hostile”: the server's reply to /v1/chat/completions " \
           "is larger than 128 KB" in str(caught.value)
    assert flood.sent["/v1/chat/completions"] < FLOOD / 4


def test_a_flood_of_an_embedding_reply_fails_the_job_for_good(db, flood, small_caps):
    profile = EndpointProfileFactory(base_url=flood.base_url, embedding_model="demo-embed")
    with pytest.raises(EmbeddingFailed, match="reply to /v1/embeddings is larger than 128 KB"):
        list(embed(profile, ["The lighthouse keeper lights the lamp."]))
    assert flood.sent["/v1/embeddings"] < FLOOD / 4


def test_test_connection_names_a_flooded_model_list(admin_client, flood, small_caps):
    profile = EndpointProfileFactory(base_url=flood.base_url)
    page = admin_client.post(reverse("admin:endpoints_endpointprofile_test", args=[profile.pk])).content.decode()
    assert "reply to /v1/models is larger than 128 KB" in page
    assert flood.sent["/v1/models"] < FLOOD / 4


def test_an_honest_reply_under_the_cap_is_read_as_before(db, model, small_caps):
    model.n_ctx = 4096
    found = probing.probe_window(EndpointProfileFactory(base_url=model.base_url))
    assert found.tokens == 4096
