"""Stop ends a real model's narration while it streams, and the words the
reader had already seen stay in the story."""

import html

import pytest

from storyapp.models import Action

from .conftest import new_campaign, profile_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def campaign(alice, llama_server):
    """A reply long enough (up to 600 tokens) to still be coming when Stop is pressed."""
    return new_campaign(alice, profile_for(llama_server, max_output_tokens=600))


def test_stop_mid_stream_keeps_the_text_shown(reader):
    action_id = reader.submit("I tell the innkeeper the whole long story of my journey, from the very beginning.")
    shown = reader.follow(action_id, until=lambda text: len(text.split()) >= 5)
    assert Action.objects.get(pk=action_id).status == Action.Status.STREAMING, "the reply ended before Stop"

    reader.post(f"actions/{action_id}/stop/")
    narration = reader.settled(action_id)

    assert narration.status == Action.Status.STOPPED
    assert not narration.error
    assert narration.text.startswith(shown.strip())
    assert narration.snapshot.report["sections"]
    page = reader.client.get(f"/campaigns/{reader.campaign.pk}/").text
    assert html.escape(narration.text.splitlines()[0][:40]) in page
