"""Asking the model server what it accepts, and counting like it.

Each kind of server is played by a small loopback HTTP server answering the
routes that kind really has, with the shapes its documentation gives.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

from contextbuild import build_context
from endpoints import probing, window
from endpoints.models import EndpointProfile
from storyapp import prompting
from tests.factories import CampaignFactory, EndpointProfileFactory, UserFactory


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.seen.append((self.command, self.path, body))
        status, payload = self.server.routes.get((self.command, self.path), (404, {"error": "not found"}))
        if callable(payload):
            status, payload = payload(body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer


@pytest.fixture
def server():
    """A loopback server whose routes each test sets."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.routes, httpd.seen = {}, []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def profile_at(server, **fields):
    return EndpointProfileFactory(base_url=server.base_url, chat_model="narrator-7b", **fields)


def overflow(body):
    return 400, {"error": {"message": "This model's maximum context length is 2048 tokens. However, you requested "
                           "4200 tokens", "type": "invalid_request_error", "code": "context_length_exceeded"}}


@pytest.mark.parametrize(
    ("routes", "tokens", "source"),
    [
        ({("GET", "/props"): (200, {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2})},
         4096, "llama.cpp /props"),
        ({("GET", "/api/extra/true_max_context_length"): (200, {"value": 8192})}, 8192, "KoboldCpp"),
        ({("GET", "/v1/models"): (200, {"data": [{"id": "narrator-7b", "max_model_len": 16384}]})}, 16384, "vLLM"),
        ({("GET", "/api/v0/models/narrator-7b"): (200, {"max_context_length": 32768, "loaded_context_length": 8192})},
         8192, "LM Studio"),
        ({("POST", "/api/show"): (200, {"parameters": "temperature 0.7\nnum_ctx 12288", "model_info": {}})},
         12288, "Ollama"),
        ({("POST", "/api/show"): (200, {"parameters": "", "model_info": {"llama.context_length": 131072}}),
          ("GET", "/api/version"): (200, {"version": "0.5.7"})}, 2048, "Ollama"),
        ({("POST", "/api/show"): (200, {"parameters": "", "model_info": {"llama.context_length": 131072}}),
          ("GET", "/api/version"): (200, {"version": "0.12.3"})}, 4096, "Ollama"),
        ({("POST", "/extras/tokenize/count"): (200, {"count": 64}), ("POST", "/v1/completions"): (400, overflow)},
         2048, "llama-cpp-python"),
    ],
)
def test_each_kind_of_server_is_asked_its_own_way(db, server, routes, tokens, source):
    server.routes = routes
    found = probing.probe_window(profile_at(server))
    assert found.verified and found.tokens == tokens
    assert found.source.startswith(source)


def test_llama_cpp_python_is_asked_for_one_token_more_than_the_budget(db, server):
    server.routes = {("POST", "/extras/tokenize/count"): (200, {"count": 64}), ("POST", "/v1/completions"): (400, overflow)}
    probing.probe_window(profile_at(server, context_token_budget=3000))
    [(_, _, sent)] = [s for s in server.seen if s[1] == "/v1/completions"]
    assert sent["max_tokens"] == 1 and len(sent["prompt"].split()) >= 3001


def test_a_server_that_says_nothing_is_not_verified(db, server):
    found = probing.probe_window(profile_at(server))
    assert not found.verified and "not verified" in found.detail


def test_a_dead_server_is_unreachable_not_verified(db):
    found = probing.probe_window(EndpointProfileFactory(base_url="http://127.0.0.1:9/v1"))
    assert not found.verified and found.source == "unreachable"


def test_the_probed_window_caps_the_budget_and_the_report_says_where_it_came_from(
    campaign_with_turn, model
):
    model.n_ctx = 2048
    campaign, narration = campaign_with_turn(budget=8192)
    window = narration.snapshot.report["window"]
    assert window == {"verified": True, "tokens": 2048, "source": "llama.cpp /props", "model_max": None,
                      "detail": "n_ctx 2,048 per slot, 1 slots", "capped": True}
    tokens = narration.snapshot.report["tokens"]
    assert tokens["budget"] == 2048
    assert tokens["total"] * tokens["ratio_budgeted"] + tokens["output_reserve"] <= 2048


def test_a_turn_records_the_servers_count_and_the_ratio(campaign_with_turn, model):
    campaign, narration = campaign_with_turn()
    tokens = narration.snapshot.report["tokens"]
    assert tokens["server_prompt_tokens"] > 0 and tokens["server_count_source"] == "usage"
    assert 0.5 < tokens["ratio"] < 1.2
    profile = EndpointProfile.objects.get(pk=campaign.endpoint_id)
    assert profile.token_ratio == pytest.approx(tokens["ratio"], abs=1e-3)
    second = campaign_with_turn.again(campaign, "I wait.")
    assert second.snapshot.report["tokens"]["ratio_on_profile"] == profile.token_ratio


def test_a_failed_turn_makes_the_next_one_ask_the_server_again(campaign_with_turn, model):
    campaign, _ = campaign_with_turn()
    profile = EndpointProfile.objects.get(pk=campaign.endpoint_id)
    assert profile.probed_at is not None
    model.script({"status": 500, "message": "boom"})
    campaign_with_turn.again(campaign, "I wait.")
    assert EndpointProfile.objects.get(pk=profile.pk).probed_at is None


def test_saving_a_profile_in_the_admin_asks_its_server(admin_client, model, django_capture_on_commit_callbacks):
    model.n_ctx = 4096
    profile = EndpointProfileFactory(base_url=model.base_url, context_token_budget=8192)
    change = reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])
    form = admin_client.get(change).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data.update(api_key="", is_default="", is_scripted_demo="")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(change, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    profile.refresh_from_db()
    assert profile.probed_window_tokens == 4096 and profile.probed_window_source == "llama.cpp /props"
    assert "4,096 tokens, from llama.cpp /props" in admin_client.get(change).content.decode()


def test_test_connection_lists_models_window_and_embedding_width(admin_client, model):
    model.n_ctx = 4096
    profile = EndpointProfileFactory(base_url=model.base_url, embedding_model="demo-embed")
    page = admin_client.post(reverse("admin:endpoints_endpointprofile_test", args=[profile.pk])).content.decode()
    assert "<code>demo-narrator</code>" in page
    assert "4096 tokens, from llama.cpp /props" in page
    assert "Working: vectors of" in page


def test_test_connection_says_plainly_what_failed(admin_client, db):
    profile = EndpointProfileFactory(base_url="http://127.0.0.1:9/v1")
    page = admin_client.post(reverse("admin:endpoints_endpointprofile_test", args=[profile.pk])).content.decode()
    assert "Failed." in page and "Could not reach" in page


def test_test_connection_is_for_admins_only(client, db):
    profile = EndpointProfileFactory()
    client.force_login(UserFactory(username="carol"))
    response = client.post(reverse("admin:endpoints_endpointprofile_test", args=[profile.pk]))
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.fixture
def campaign_with_turn(alice, model, django_capture_on_commit_callbacks):
    from django.utils import timezone

    from storyapp import services

    def again(campaign, text):
        campaign.refresh_from_db()
        with django_capture_on_commit_callbacks(execute=True):
            _, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
        narration.refresh_from_db()
        return narration

    def play(budget=4096):
        profile = EndpointProfileFactory(base_url=model.base_url, context_token_budget=budget)
        campaign = CampaignFactory(owner=alice, endpoint=profile)
        return campaign, again(campaign, "I walk to the quay.")

    play.again = again
    return play


def test_a_completions_profile_sends_one_labelled_text_and_stores_it(alice, model, django_capture_on_commit_callbacks):
    from django.utils import timezone

    from storyapp import services

    profile = EndpointProfileFactory(base_url=model.base_url, api_mode=EndpointProfile.ApiMode.COMPLETIONS)
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    with django_capture_on_commit_callbacks(execute=True):
        _, narration = services.turn_submit(campaign=campaign, text="I walk to the quay.", now=timezone.now())
    narration.refresh_from_db()
    [sent] = [r for r in model.requests() if r["path"] == "/v1/completions"]
    assert narration.status == "done" and narration.text
    assert sent["prompt"].endswith("Reader: I walk to the quay.\n\nNarrator:")
    assert "\nReader:" in sent["stop"]
    assert narration.snapshot.messages == [{"role": "prompt", "content": sent["prompt"]}]
    assert narration.snapshot.report["tokens"]["server_prompt_tokens"] > 0


def test_a_story_longer_than_the_window_keeps_its_history_anchor_between_turns(campaign_with_turn):
    # Small enough that ten turns outgrow it, even with the compact rules a small window gets.
    campaign, first = campaign_with_turn(budget=900)
    reports = [first.snapshot.report]
    for text in ("I wait.", "I hail the ferryman.", "I count the gulls.", "I step aboard.", "I look back.") * 2:
        reports.append(campaign_with_turn.again(campaign, text).snapshot.report)
    histories = [r["history"] for r in reports]
    assert any(h["oldest_truncated"] is False and h["included"] < h["total"] for h in histories)
    kept = [h for h in histories[1:] if h["anchor_kept"]]
    assert kept, histories
    for before, after in zip(reports, reports[1:]):
        if after["history"]["anchor_kept"]:
            assert after["history"]["anchor"] == before["history"]["anchor"]


# ------------------------------------------- a verified window kept through checks that get no answer


def busy(body):
    """A one-slot server busy with another reply: it answers after the probe gave up."""
    time.sleep(1.5)
    return overflow(body)


def llama_cpp_python_at(server, completions):
    server.routes = {("POST", "/extras/tokenize/count"): (200, {"count": 64}), ("POST", "/v1/completions"): (400, completions)}
    # A total timeout of a second: the probe may wait no longer than that, however long reading its prompt takes.
    return profile_at(server, context_token_budget=8192, first_byte_timeout_seconds=1, timeout_seconds=1,
                      max_output_tokens=300)


def test_a_probe_that_times_out_keeps_the_verified_window_and_the_next_prompt_fits_it(admin_client, server):
    profile = llama_cpp_python_at(server, overflow)
    window.probed(profile)
    assert profile.probed_window_tokens == 2048
    window.forget_probe(profile)  # as a failed turn does
    server.routes[("POST", "/v1/completions")] = (400, busy)
    window.probed(profile)
    profile.refresh_from_db()
    assert profile.probed_window_tokens == 2048 and profile.probed_at is not None
    assert "did not answer the probe in time (APITimeoutError)" in profile.probe_note
    page = admin_client.get(reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])).content.decode()
    assert "2,048 tokens, from llama-cpp-python" in page and "did not answer the probe in time" in page
    assert "the window above stands" in page
    campaign = CampaignFactory(owner=UserFactory(username="alice"), endpoint=profile)
    report = build_context(prompting.turn_inputs(campaign, profile, position=None, with_knowledge=False)).report
    tokens = report["tokens"]
    assert tokens["budget"] == 2048 and report["window"]["verified"] and "did not answer" in report["window"]["detail"]
    assert tokens["total"] * tokens["ratio_budgeted"] + tokens["output_reserve"] <= 2048


def test_an_unreachable_server_keeps_the_verified_window(db):
    profile = EndpointProfileFactory(base_url="http://127.0.0.1:9/v1", context_token_budget=8192)
    window.store_probe(profile, probing.ServerWindow(4096, "llama.cpp /props", "n_ctx 4,096 per slot"))
    window.store_probe(profile, probing.probe_window(profile))
    profile.refresh_from_db()
    assert profile.probed_window_tokens == 4096 and "could not reach the server" in profile.probe_note
    assert window.effective_budget(profile) == 4096


def test_a_server_that_names_another_window_replaces_the_kept_one(db, server):
    profile = profile_at(server, context_token_budget=8192)
    window.store_probe(profile, probing.ServerWindow(None, "timed out", "no answer"))
    window.store_probe(profile, probing.ServerWindow(2048, "llama.cpp /props", "n_ctx 2,048 per slot"))
    window.store_probe(profile, probing.ServerWindow(None, "timed out", "no answer"))
    server.routes = {("GET", "/props"): (200, {"default_generation_settings": {"n_ctx": 4096}})}
    window.store_probe(profile, probing.probe_window(profile))
    profile.refresh_from_db()
    assert profile.probed_window_tokens == 4096 and profile.probe_note == ""
    assert window.effective_budget(profile) == 4096
