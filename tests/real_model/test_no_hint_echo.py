"""What a small model copies from the prompt's instructions never becomes
story: after five real turns, no stored narration holds a hint, a state
block or a piece of the prompt's framing."""

import pytest

from contextbuild.rules import EMIT_REMINDER, INSTRUCTION_OPENERS
from storyapp.models import Action

from .conftest import ACTIONS

#: The openers of every bracketed instruction, the state block's tags, and the
#: framing the prompt puts around the state.
LEAKS = sorted(
    {f"[{opener}" for opener in INSTRUCTION_OPENERS}
    | {EMIT_REMINDER[:20], "[End your reply", "Hard limit:", "Authoritative:", "<state>", "</state>"}
)


@pytest.mark.django_db
def test_no_instruction_or_state_block_reaches_the_stored_prose(campaign, play_here):
    for text in ACTIONS[:5]:
        narration = play_here(campaign, text)
        assert narration.status == Action.Status.DONE, narration.error

    stored = list(Action.objects.filter(campaign=campaign, kind=Action.Kind.AI).values_list("text", flat=True))
    assert len(stored) == 5
    found = [(leak, text) for text in stored for leak in LEAKS if leak.lower() in text.lower()]
    assert not found, found
