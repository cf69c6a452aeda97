"""What the server itself says is what a turn is budgeted by: the window is
asked of llama-cpp-python (2,048 tokens here, though the profile's budget is
left at 8,192), and the server's own count of the prompt is read back and
kept, as a ratio to ours, on the profile."""

import pytest

from .conftest import ACTIONS, CONTEXT_TOKENS

pytestmark = pytest.mark.django_db


def test_the_window_is_read_from_the_server(campaign, play_here):
    narration = play_here(campaign, ACTIONS[0])

    window = narration.snapshot.report["window"]
    assert window["verified"] is True, window
    assert window["tokens"] == CONTEXT_TOKENS, window
    assert "llama" in window["source"].lower(), window


def test_the_servers_prompt_count_and_its_ratio_to_ours_are_recorded(campaign, narrator, play_here):
    narration = play_here(campaign, ACTIONS[0])

    tokens = narration.snapshot.report["tokens"]
    assert isinstance(tokens["server_prompt_tokens"], int) and tokens["server_prompt_tokens"] > 0, tokens
    assert isinstance(tokens["ratio"], float) and 0.8 <= tokens["ratio"] <= 1.5, tokens
    narrator.refresh_from_db()
    assert isinstance(narrator.token_ratio, float) and 0.8 <= narrator.token_ratio <= 1.5
