"""A failing endpoint ends the turn with a clear message and loses nothing."""

import pytest
from django.utils import timezone

from storyapp import services
from storyapp.models import Action
from tests.factories import CampaignFactory, EndpointProfileFactory


def _turn(campaign, text, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        player, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
    narration.refresh_from_db()
    return player, narration


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"status": 401}, "refused the API key (401)"),
        ({"status": 429}, "rate limiting requests (429)"),
        ({"status": 500}, "failed with an error (500)"),
        ({"status": 503}, "failed with an error (503)"),
        ({"refuse": True}, "refused to continue"),
        ({"cut_after": 20}, "cut off"),
    ],
)
def test_an_endpoint_failure_is_explained_and_the_players_text_is_kept(
    campaign, model, django_capture_on_commit_callbacks, step, message
):
    model.script(step)
    player, narration = _turn(campaign, "I light the lantern.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert message in narration.error
    player.refresh_from_db()
    assert player.text == "I light the lantern."
    assert campaign.endpoint.api_key not in narration.error or not campaign.endpoint.api_key


def test_a_stalled_endpoint_times_out_with_a_message(alice, model, django_capture_on_commit_callbacks):
    # A server known to read prompts fast: its wait is the profile's second (endpoints.promptspeed).
    slow = EndpointProfileFactory(base_url=model.base_url, first_byte_timeout_seconds=1, prompt_tokens_per_second=1e5)
    campaign = CampaignFactory(owner=alice, endpoint=slow)
    model.script({"stall": 3})
    _, narration = _turn(campaign, "Wait.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert "sent nothing for 1 seconds" in narration.error and "first-byte timeout" in narration.error


def test_a_reply_that_goes_silent_midway_keeps_its_text_and_says_so(alice, model, django_capture_on_commit_callbacks):
    slow = EndpointProfileFactory(base_url=model.base_url, first_byte_timeout_seconds=1, prompt_tokens_per_second=1e5)
    campaign = CampaignFactory(owner=alice, endpoint=slow)
    model.script({"reply": "The lamp gutters and the dark comes in.", "pause_after": 2, "pause": 3})
    _, narration = _turn(campaign, "Wait.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert "went silent for 1 seconds in the middle" in narration.error and narration.text.startswith("The")


def test_a_reply_past_the_total_timeout_is_ended_with_its_text_kept(alice, model, django_capture_on_commit_callbacks):
    slow = EndpointProfileFactory(base_url=model.base_url, first_byte_timeout_seconds=5, timeout_seconds=1)
    campaign = CampaignFactory(owner=alice, endpoint=slow)
    model.script({"reply": " ".join(f"word{n}" for n in range(60)), "delay": 0.05})
    _, narration = _turn(campaign, "Talk.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert "still coming after 1 seconds" in narration.error and narration.text.startswith("word0")


def test_an_unreachable_endpoint_is_explained(alice, django_capture_on_commit_callbacks, db):
    dead = EndpointProfileFactory(base_url="http://127.0.0.1:9/v1")
    campaign = CampaignFactory(owner=alice, endpoint=dead)
    _, narration = _turn(campaign, "Hello?", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert "Could not reach" in narration.error


def test_retry_after_a_failure_narrates_the_same_action_again(campaign, model, django_capture_on_commit_callbacks):
    model.script({"status": 500}, {"reply": "The lantern catches."})
    player, failed = _turn(campaign, "I light the lantern.", django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        retried = services.turn_retry(campaign=campaign, now=timezone.now())
    retried.refresh_from_db()
    assert retried.pk == failed.pk
    assert retried.status == Action.Status.DONE and retried.text == "The lantern catches." and not retried.error
    assert Action.objects.filter(campaign=campaign, kind=Action.Kind.AI).count() == 1


def test_a_cut_stream_keeps_the_text_that_arrived(campaign, model, django_capture_on_commit_callbacks):
    model.script({"reply": "The fog rolls in over the quay, thick as wool.", "cut_after": 25})
    _, narration = _turn(campaign, "Look.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert narration.text and "The fog rolls in".startswith(narration.text[:16])


def test_a_prompt_that_cannot_fit_fails_before_calling_the_model(alice, model, django_capture_on_commit_callbacks):
    tiny = EndpointProfileFactory(base_url=model.base_url, context_token_budget=200, max_output_tokens=150)
    campaign = CampaignFactory(owner=alice, endpoint=tiny, plot_essentials="A long history. " * 50)
    _, narration = _turn(campaign, "Go.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert "200" in narration.error
    assert not [r for r in model.requests() if r["path"].endswith("/chat/completions")]


OVERFLOW = ("This model's maximum context length is 2048 tokens. However, you requested 2300 tokens "
            "(2000 in the messages, 300 in the completion).")


def test_a_server_side_overflow_is_named_and_the_next_turn_fits(alice, model, django_capture_on_commit_callbacks):
    profile = EndpointProfileFactory(base_url=model.base_url, context_token_budget=8192)
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    model.script({"status": 400, "message": OVERFLOW})
    _, narration = _turn(campaign, "Wait.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert "too long for" in narration.error and "2,048 tokens" in narration.error and "press Retry" in narration.error
    profile.refresh_from_db()
    assert profile.learned_window_tokens == 2048
    with django_capture_on_commit_callbacks(execute=True):
        services.turn_retry(campaign=campaign, now=timezone.now())
    narration.refresh_from_db()
    window = narration.snapshot.report["window"]
    assert narration.status == Action.Status.DONE
    assert window["verified"] and window["tokens"] == int(2048 * 0.9) and window["capped"]
    assert narration.snapshot.report["tokens"]["budget"] <= 2048


def test_a_stream_dropped_for_an_overflow_is_recognised(alice, model, django_capture_on_commit_callbacks):
    """llama-cpp-python answers 200 and drops the stream; asked again without streaming, it names the window."""
    profile = EndpointProfileFactory(base_url=model.base_url)
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    model.script({"reply": "", "cut_after": 0}, {"status": 400, "message": OVERFLOW})
    _, narration = _turn(campaign, "Wait.", django_capture_on_commit_callbacks)
    assert "too long for" in narration.error and "cut off" not in narration.error
    profile.refresh_from_db()
    assert profile.learned_window_tokens == 2048


def test_an_overflow_without_a_size_shrinks_the_budget_each_time(alice, model, django_capture_on_commit_callbacks):
    profile = EndpointProfileFactory(base_url=model.base_url, context_token_budget=4000)
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    model.script({"status": 400, "message": "the request exceeds the available context size"})
    _turn(campaign, "Wait.", django_capture_on_commit_callbacks)
    profile.refresh_from_db()
    assert profile.learned_window_tokens == int(4000 * 0.85)


def test_a_stream_that_ends_before_any_text_does_not_claim_text_was_kept(alice, model, django_capture_on_commit_callbacks):
    profile = EndpointProfileFactory(base_url=model.base_url)
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    model.script({"reply": "", "cut_after": 0}, {"reply": "fine"})
    _, narration = _turn(campaign, "Wait.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED
    assert "before writing anything" in narration.error and "text so far is kept" not in narration.error


def test_a_prompt_too_big_for_the_window_forgets_the_probe_so_retry_asks_again(
    alice, model, django_capture_on_commit_callbacks
):
    profile = EndpointProfileFactory(base_url=model.base_url, context_token_budget=8192)
    campaign = CampaignFactory(owner=alice, endpoint=profile, ai_instructions="Speak softly. " * 3000)
    _, narration = _turn(campaign, "Wait.", django_capture_on_commit_callbacks)
    assert narration.status == Action.Status.FAILED and "protected context needs" in narration.error
    profile.refresh_from_db()
    assert profile.probed_at is None
