"""A reasoning model's thinking never becomes story: not the stored prose,
the next prompt's history or the summaries; the play page and the inspector
show it apart, and a reply that only thought fails with Retry (issue 26, item 5)."""

import pytest
from django.urls import reverse
from django.utils import timezone

from endpoints.models import EndpointProfile
from storyapp import services
from storyapp.models import Action
from tests.factories import CampaignFactory, EndpointProfileFactory


@pytest.fixture
def turn(alice, model, django_capture_on_commit_callbacks):
    def play(campaign, text="I walk to the quay."):
        with django_capture_on_commit_callbacks(execute=True):
            _, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
        narration.refresh_from_db()
        return narration

    return play


@pytest.fixture
def campaign(alice, model):
    return CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url))


def test_think_tags_in_the_reply_stay_out_of_the_story_and_the_next_prompt(campaign, model, turn):
    model.script({"reply": "<think>The reader wants the quay. I will add gulls.</think>Gulls wheel over the quay."})
    narration = turn(campaign)
    assert narration.status == "done"
    assert narration.text == "Gulls wheel over the quay."
    assert narration.thinking == "The reader wants the quay. I will add gulls."
    turn(campaign, "I follow the gulls.")
    sent = [r for r in model.requests() if r["path"] == "/v1/chat/completions"][-1]
    assert "I will add gulls" not in str(sent["messages"])
    assert any(m["content"] == "Gulls wheel over the quay." for m in sent["messages"] if m["role"] == "assistant")


def test_reasoning_content_deltas_are_kept_apart(campaign, model, turn, client, alice):
    model.script({"reasoning": "Tide first, then the gulls.", "reply": "The tide turns under the pier."})
    narration = turn(campaign)
    assert narration.text == "The tide turns under the pier."
    assert narration.thinking == "Tide first, then the gulls."
    client.force_login(alice)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "The model's thinking" in page and "Tide first, then the gulls." in page
    play = client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert "Tide first, then the gulls." not in play


def test_a_reply_that_only_thought_fails_with_retry_not_an_empty_narration(campaign, model, turn):
    model.script({"reply": "<think>The quay, the gulls, the tide, the"})
    narration = turn(campaign)
    assert narration.status == Action.Status.FAILED
    assert "spent its whole reply thinking" in narration.error and "Retry" in narration.error
    assert narration.text == ""


def test_a_profile_set_not_to_think_asks_the_server_and_qwen3_itself(alice, model, turn):
    profile = EndpointProfileFactory(
        base_url=model.base_url, chat_model="Qwen3-8B", thinking=EndpointProfile.Thinking.OFF,
        reasoning_reserve_tokens=300, max_output_tokens=200,
    )
    turn(CampaignFactory(owner=alice, endpoint=profile))
    [sent] = [r for r in model.requests() if r["path"] == "/v1/chat/completions"]
    assert sent["extra"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert sent["messages"][0]["content"].endswith("/no_think")
    assert sent["max_tokens"] == 500


def test_thinking_deltas_reach_the_caller_before_any_prose(campaign, model):
    from endpoints.streaming import Meter, stream_reply

    model.script({"reasoning": "Tide first, then the gulls.", "reply": "The tide turns."})
    meter = Meter()
    pieces = list(stream_reply(campaign.endpoint, messages=[{"role": "user", "content": "Go on."}], temperature=0.5,
                               max_tokens=50, meter=meter))
    assert pieces[0] == "" and "".join(pieces) == "The tide turns."
    assert meter.reasoning == "Tide first, then the gulls."
