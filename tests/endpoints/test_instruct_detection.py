"""Completions mode renders the prompt in the model's own instruct template,
detected from what the server says of its model (issue 26, items 1, 2 and 6)."""

import pytest
from django.urls import reverse
from django.utils import timezone

from endpoints import instructprobe
from endpoints.models import EndpointProfile
from storyapp import services
from tests.factories import CampaignFactory, EndpointProfileFactory

CHATML = "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}"


@pytest.fixture
def play(alice, model, django_capture_on_commit_callbacks):
    def turn(profile, text="I walk to the quay."):
        campaign = CampaignFactory(owner=alice, endpoint=profile)
        with django_capture_on_commit_callbacks(execute=True):
            _, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
        narration.refresh_from_db()
        [sent] = [r for r in model.requests() if r["path"] == "/v1/completions"]
        return narration, sent

    return turn


def test_a_server_showing_a_chatml_template_gets_its_prompt_in_chatml(model, play):
    model.chat_template = CHATML
    profile = EndpointProfileFactory(base_url=model.base_url, api_mode=EndpointProfile.ApiMode.COMPLETIONS)
    model.script({"reply": "The tide turns under the pier.<|im_end|>\n<|im_start|>user\nI answer for the reader."})
    narration, sent = play(profile)
    assert sent["prompt"].startswith("<|im_start|>system\n")
    assert sent["prompt"].endswith("I walk to the quay.<|im_end|>\n<|im_start|>assistant\n")
    assert "<|im_end|>" in sent["stop"]
    assert narration.text == "The tide turns under the pier."
    assert narration.snapshot.report["prompt"]["template"] == "chatml"
    profile.refresh_from_db()
    assert profile.detected_template == "chatml" and "/props" in profile.detected_template_why


def test_a_server_without_a_chat_template_is_judged_by_its_models_name(model, play):
    profile = EndpointProfileFactory(
        base_url=model.base_url, api_mode=EndpointProfile.ApiMode.COMPLETIONS, chat_model="Meta-Llama-3.1-8B-Instruct"
    )
    _, sent = play(profile)
    assert sent["prompt"].startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n")
    assert sent["prompt"].endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert "<|eot_id|>" in sent["stop"]


def test_a_base_model_gets_plain_labels_and_never_writes_the_readers_turn(model, play):
    profile = EndpointProfileFactory(
        base_url=model.base_url, api_mode=EndpointProfile.ApiMode.COMPLETIONS, chat_model="gpt2-base"
    )
    model.script({"reply": "Gulls wheel over the quay.\nReader: I follow them."})
    narration, sent = play(profile)
    assert sent["prompt"].endswith("Reader: I walk to the quay.\n\nNarrator:")
    assert narration.text == "Gulls wheel over the quay."
    assert narration.snapshot.report["prompt"]["template"] == "plain"


def test_the_admins_choice_wins_over_the_detected_template(model, play):
    model.chat_template = CHATML
    profile = EndpointProfileFactory(
        base_url=model.base_url, api_mode=EndpointProfile.ApiMode.COMPLETIONS, instruct_template="gemma"
    )
    _, sent = play(profile)
    assert sent["prompt"].startswith("<bos><start_of_turn>user\n")
    assert sent["prompt"].endswith("<start_of_turn>model\n")


def test_an_unreachable_server_leaves_the_last_detection_standing(db):
    profile = EndpointProfileFactory(base_url="http://127.0.0.1:9/v1", detected_template="chatml",
                                     detected_template_why="its chat template has “<|im_start|>”")
    instructprobe.store_detection(profile)
    profile.refresh_from_db()
    assert profile.detected_template == "chatml"


def test_the_profile_page_and_the_connection_test_show_the_template_and_why(admin_client, model):
    model.chat_template = CHATML
    profile = EndpointProfileFactory(base_url=model.base_url, api_mode=EndpointProfile.ApiMode.COMPLETIONS)
    page = admin_client.post(reverse("admin:endpoints_endpointprofile_test", args=[profile.pk])).content.decode()
    assert "ChatML: its chat template has “&lt;|im_start|&gt;” (from /props)." in page
    change = admin_client.get(reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])).content.decode()
    assert "Detected template" in change and "ChatML" in change
    assert '<option value="mistral-v7-tekken">Mistral V7 Tekken</option>' in change
