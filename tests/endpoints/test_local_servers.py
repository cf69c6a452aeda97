"""A local server as its users run it: one request at a time, and slow to
read a long prompt (issue 26, item 7). Loremaster keeps its own requests
within the server's slots, the reader's narration first, and waits for the
first word as long as reading the prompt takes."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from endpoints import probing, promptspeed, slots, window
from endpoints.models import EndpointLease, EndpointProfile
from endpoints.streaming import Meter, stream_reply
from tests.factories import EndpointProfileFactory

NARRATION, DERIVED, PROBE = EndpointLease.Kind.NARRATION, EndpointLease.Kind.DERIVED, EndpointLease.Kind.PROBE


def _lease(profile, kind, *, holding=False, age=0):
    at = timezone.now() - timedelta(seconds=age)
    return EndpointLease.objects.create(profile=profile, kind=kind, holding=holding, holder="test", since=at, beat=at)


def test_a_held_slot_makes_the_next_request_wait_and_a_narration_goes_before_a_summary(db):
    profile = EndpointProfileFactory(server_slots=1)
    holding = _lease(profile, DERIVED, holding=True)
    summary = _lease(profile, DERIVED)
    narration = _lease(profile, NARRATION)
    assert not slots._take(narration, 1) and not slots._take(summary, 1)
    holding.delete()
    assert not slots._take(summary, 1), "the narration waiting is served first"
    assert slots._take(narration, 1)


def test_a_dead_workers_slot_is_freed(db):
    profile = EndpointProfileFactory(server_slots=1)
    _lease(profile, NARRATION, holding=True, age=slots.STALE_SECONDS + 5)
    probe = _lease(profile, PROBE)
    assert slots._take(probe, 1)
    assert EndpointLease.objects.filter(profile=profile).count() == 1


def test_a_server_with_two_slots_serves_two_at_once(db):
    profile = EndpointProfileFactory(server_slots=2)
    first, second, third = (_lease(profile, NARRATION) for _ in range(3))
    assert slots._take(first, 2) and slots._take(second, 2) and not slots._take(third, 2)


def test_the_admins_setting_wins_and_no_known_limit_means_no_waiting(db):
    assert slots.capacity(EndpointProfileFactory(server_slots=4, max_concurrent_requests=1)) == 1
    profile = EndpointProfileFactory()
    with slots.held(profile, NARRATION):
        assert not EndpointLease.objects.exists()


def test_waiting_for_a_slot_is_told_and_ends_when_the_slot_is_free(transactional_db):
    profile = EndpointProfileFactory(server_slots=1)
    release, holding = threading.Event(), threading.Event()
    told = []

    def summary():
        try:
            with slots.held(profile, DERIVED):
                holding.set()
                release.wait(5)
        finally:
            connections.close_all()

    thread = threading.Thread(target=summary)
    thread.start()
    assert holding.wait(5)
    threading.Timer(0.6, release.set).start()
    started = time.monotonic()
    with slots.held(profile, NARRATION, waiting=told.append):
        waited = time.monotonic() - started
        assert EndpointLease.objects.get(kind=NARRATION).holding
    thread.join(5)
    assert told == [True, False] and waited >= 0.5
    assert not EndpointLease.objects.exists()


def test_the_first_word_is_waited_for_as_long_as_reading_the_prompt_takes(db):
    local = EndpointProfileFactory(first_byte_timeout_seconds=30, timeout_seconds=300,
                                   probed_window_source="llama-cpp-python (it accepted a budget-sized prompt)")
    assert promptspeed.first_byte_wait(local, 2000) == 30 + 2000 / promptspeed.UNMEASURED_LOCAL_SPEED * 1.5
    local.prompt_tokens_per_second = 1000
    assert promptspeed.first_byte_wait(local, 2000) == 33
    hosted = EndpointProfileFactory(first_byte_timeout_seconds=30)
    assert promptspeed.first_byte_wait(hosted, 20000) == 30, "a hosted API is not assumed slow"
    local.prompt_tokens_per_second = 2
    assert promptspeed.first_byte_wait(local, 20000) == 300, "never past the total timeout"


def test_the_reading_speed_is_learned_slower_at_once_and_faster_slowly(db):
    profile = EndpointProfileFactory()
    assert promptspeed.record(profile, prompt_tokens=2000, first_byte_seconds=20, timings=None) == 100
    assert promptspeed.record(profile, prompt_tokens=2000, first_byte_seconds=40, timings=None) == 50
    assert promptspeed.record(profile, prompt_tokens=None, first_byte_seconds=None,
                              timings={"prompt_n": 1500, "prompt_per_second": 150.0}) == 70
    assert promptspeed.record(profile, prompt_tokens=100, first_byte_seconds=0.01, timings=None) == 70, "too short to tell"
    profile.refresh_from_db()
    assert profile.prompt_tokens_per_second == 70


def test_a_slow_first_word_within_the_prompts_reading_time_is_not_a_timeout(db, model):
    profile = EndpointProfileFactory(base_url=model.base_url, first_byte_timeout_seconds=1, timeout_seconds=60,
                                     prompt_tokens_per_second=100)
    model.script({"stall": 2, "reply": "The lamp gutters."})
    text = "".join(stream_reply(profile, messages=[{"role": "user", "content": "Go on."}], temperature=0.5,
                                max_tokens=50, meter=Meter(), prompt_tokens=600))
    assert text == "The lamp gutters."
    profile.refresh_from_db()
    # 600 tokens read in about 2 s: 300 a second, believed a fifth of the way from 100.
    assert 130 < profile.prompt_tokens_per_second < 145


def test_a_probe_the_server_is_too_slow_to_answer_is_slow_and_asked_again_later(db):
    profile = EndpointProfileFactory(base_url="http://127.0.0.1:9/v1")
    window.store_probe(profile, probing.ServerWindow(2048, "llama.cpp /props", "n_ctx 2,048", slots=1))
    window.store_probe(profile, probing.ServerWindow(None, probing.SLOW, "the server is slow"))
    profile.refresh_from_db()
    assert profile.probed_window_tokens == 2048 and profile.server_slots == 1
    assert profile.probe_note.startswith(window.SLOW_NOTE)
    asked = []
    probing_window = window.probe_window
    window.probe_window = lambda p: asked.append(p) or probing_window(p)
    try:
        window.probed(profile, now=profile.probed_at + timedelta(minutes=5))
        assert not asked
        window.probed(profile, now=profile.probed_at + timedelta(minutes=11))
        assert asked
    finally:
        window.probe_window = probing_window


@pytest.mark.parametrize(("source", "slots_seen"), [("llama.cpp /props", 2), ("KoboldCpp", 1), ("llama-cpp-python", 1)])
def test_the_probe_learns_how_many_requests_the_server_serves(db, source, slots_seen):
    assert EndpointProfile._meta.get_field("server_slots")
    found = {"llama.cpp /props": probing.ServerWindow(4096, source, "", slots=2),
             "KoboldCpp": probing.ServerWindow(8192, source, "", slots=1),
             "llama-cpp-python": probing.ServerWindow(2048, source, "", slots=1)}[source]
    profile = EndpointProfileFactory()
    window.store_probe(profile, found)
    profile.refresh_from_db()
    assert profile.server_slots == slots_seen
