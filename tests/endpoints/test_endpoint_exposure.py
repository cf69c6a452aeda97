"""What passes through a model endpoint: no redirect is followed (the
allowlist checks only the base URL, so a 307 must not carry the prompt
elsewhere), and a reader's failure message names the profile, not its
address, with at most a line of the server's own text."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from storyapp import services
from storyapp.models import Action
from tests.factories import CampaignFactory, EndpointProfileFactory


@pytest.fixture
def redirector(model):
    """A loopback server that answers everything with 307 to the demo model server."""

    class Redirect(BaseHTTPRequestHandler):
        def _redirect(self):
            self.send_response(307)
            self.send_header("Location", model.base_url.removesuffix("/v1") + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _redirect

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_redirecting_endpoint_gets_no_prompt_through(alice, model, redirector, django_capture_on_commit_callbacks):
    profile = EndpointProfileFactory(base_url=redirector, embedding_model="")
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    with django_capture_on_commit_callbacks(execute=True):
        _, narration = services.turn_submit(campaign=campaign, text="I open the secret door.", now=timezone.now())
    narration.refresh_from_db()
    assert narration.status == Action.Status.FAILED
    assert "redirect (307)" in narration.error and "never follows" in narration.error
    assert not [r for r in model.requests() if r["path"].endswith("/chat/completions")], "the prompt was not carried"


def test_a_failure_shows_the_reader_neither_the_endpoint_address_nor_a_wall_of_upstream_text(
    alice, endpoint, model, django_capture_on_commit_callbacks
):
    model.script({"status": 400, "message": "Internal detail: " + "stack frame\n" * 200})
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    with django_capture_on_commit_callbacks(execute=True):
        _, narration = services.turn_submit(campaign=campaign, text="I wait.", now=timezone.now())
    narration.refresh_from_db()
    assert narration.status == Action.Status.FAILED and endpoint.name in narration.error
    assert endpoint.base_url not in narration.error and "127.0.0.1" not in narration.error
    assert "Internal detail" not in narration.error and len(narration.error) < 400 and "\n" not in narration.error
    assert narration.error_detail.startswith("HTTP 400: Internal detail: stack frame stack frame")
    assert len(narration.error_detail) <= 1000
