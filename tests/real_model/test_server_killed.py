"""The model server dies in the middle of a narration: the turn fails with a
message that names the endpoint, the reader's action is kept, and once a
server answers on the same port again Retry narrates the turn."""

import pytest

from storyapp.models import Action

from .conftest import Reader, new_campaign, profile_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(start_llama_server):
    """A server of this test's own, so killing it leaves the session's alone."""
    return start_llama_server()


@pytest.fixture
def reader(stack, alice, server):
    campaign = new_campaign(alice, profile_for(server, max_output_tokens=600, name="Doomed llama"))
    return Reader(stack, campaign)


def test_a_server_killed_mid_stream_fails_the_turn_and_retry_works_once_it_is_back(
    reader, server, start_llama_server
):
    action_text = "I tell the innkeeper the whole long story of my journey, from the very beginning."
    action_id = reader.submit(action_text)
    reader.follow(action_id, until=lambda text: len(text.split()) >= 3)
    assert Action.objects.get(pk=action_id).status == Action.Status.STREAMING, "the reply ended before the kill"

    server.kill()
    narration = reader.settled(action_id, timeout=90)

    assert narration.status == Action.Status.FAILED
    assert "Doomed llama" in narration.error, narration.error
    assert "Retry" in narration.error
    player = narration.parent
    assert player.kind == Action.Kind.PLAYER and player.text == action_text
    reader.campaign.refresh_from_db()
    assert reader.campaign.head_id == narration.pk

    start_llama_server(port=server.port)
    retried = reader.retry()
    reader.follow(retried)
    again = reader.settled(retried)

    assert again.status == Action.Status.DONE, again.error
    assert again.text and again.parent_id == player.pk
    player.refresh_from_db()
    assert player.text == action_text
