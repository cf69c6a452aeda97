"""SmolLM2-135M-Instruct behind llama-cpp-python's `/v1/completions`, which
takes the prompt raw: Loremaster detects the model's ChatML template (the
server shows no chat template, so from the model's name) and renders the
story in it; the narrations hold no template token and no turn of the
reader's (issue 26)."""

import pytest

from .conftest import ACTIONS, profile_for

pytestmark = pytest.mark.django_db

MARKERS = ("<|im_start|>", "<|im_end|>", "Reader:", "Narrator:")


def test_completions_mode_narrates_in_the_detected_chatml_template(alice, llama_server, play_here):
    from .conftest import new_campaign

    profile = profile_for(llama_server, api_mode="completions", name="SmolLM2 completions")
    campaign = new_campaign(alice, profile)
    for text in ACTIONS[:2]:
        narration = play_here(campaign, text)
        assert narration.status == "done", narration.error
        assert narration.text.strip()
        assert not any(marker in narration.text for marker in MARKERS), narration.text
    profile.refresh_from_db()
    assert profile.detected_template == "chatml", profile.detected_template_why
    [sent] = narration.snapshot.messages
    assert sent["content"].startswith("<|im_start|>system\n")
    assert sent["content"].endswith(f"{ACTIONS[1]}<|im_end|>\n<|im_start|>assistant\n")
    assert narration.snapshot.report["prompt"]["template"] == "chatml"
