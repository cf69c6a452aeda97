"""The prompt a real chat model gets reads as a conversation: the system
message, then the reader's actions as `user` turns and the narrations as
`assistant` turns, the reader's latest action last; and the system message
stays the same from one turn to the next, so the server's prompt cache
holds."""

import pytest

from .conftest import ACTIONS

pytestmark = pytest.mark.django_db


def _roles(messages):
    return [m["role"] for m in messages]


def test_the_prompt_alternates_turns_and_ends_with_the_readers_action(campaign, play_here):
    for text in ACTIONS[:3]:
        narration = play_here(campaign, text)

    messages = narration.snapshot.messages
    assert isinstance(messages, list) and all(set(m) >= {"role", "content"} for m in messages), messages
    roles = _roles(messages)
    assert roles[0] == "system"
    assert roles[1:] == ["user", "assistant"] * ((len(roles) - 2) // 2) + ["user"], roles
    assert len(roles) >= 6, roles
    assert messages[-1]["content"].rstrip().endswith(ACTIONS[2]), messages[-1]["content"][-300:]


def test_the_prefix_is_unchanged_between_consecutive_turns(campaign, play_here):
    first = play_here(campaign, ACTIONS[0]).snapshot.messages
    second = play_here(campaign, ACTIONS[1]).snapshot.messages

    assert second[0] == first[0]
    assert second[0]["role"] == "system"
    # Everything before the last turn's live message is sent again unchanged.
    assert second[: len(first) - 1] == first[:-1]
    assert second[len(first) - 1] == {"role": "user", "content": ACTIONS[0]}
