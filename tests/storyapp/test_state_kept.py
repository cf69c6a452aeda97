"""A narration's state block moves the narrative state the turn stores, and
what it may not change is refused once, in the next prompt."""

import pytest
from django.utils import timezone

from storyapp import services
from storyapp.models import Action
from tests.factories import CampaignFactory

BLOCK = (
    'The ferryman takes your coin.\n<state>{"events": ['
    '{"type": "scene", "summary": "You cross on the ferry.", "location": "the ferry"},'
    '{"type": "entity", "id": "ferryman", "name": "The ferryman", "status": "paid"},'
    '{"type": "entity", "id": "aldric", "status": "alive"},]}</state>'
)


@pytest.fixture
def campaign(alice, endpoint):
    return CampaignFactory(
        owner=alice, endpoint=endpoint,
        canon={"rules": [], "forbidden_status_changes": [{"from": "dead", "to": "alive"}]},
        initial_state={"scene": {"summary": "Mara waits.", "location": "Westhaven harbour"},
                       "entities": {"aldric": {"name": "Aldric", "status": "dead"}}},
    )


def test_the_block_moves_the_state_and_refusals_reach_the_next_prompt_once(campaign, play, model):
    model.script({"reply": BLOCK})
    _, first = play("I pay the ferryman.")
    assert first.text == "The ferryman takes your coin."
    assert first.state["scene"] == {"summary": "You cross on the ferry.", "location": "the ferry"}
    assert first.state["entities"]["ferryman"] == {"name": "The ferryman", "status": "paid"}
    assert first.state["entities"]["aldric"]["status"] == "dead"
    [refusal] = first.state_rejections
    assert "cannot go from dead to alive" in refusal
    events = first.snapshot.report["state_events"]
    assert len(events["applied"]) == 2 and events["refused"] == [refusal]

    _, second = play("I look back at the quay.")
    prompt = second.snapshot.messages[-1]["content"]
    assert "Location: the ferry" in prompt and "The ferryman [ferryman] (paid)" in prompt
    assert "cannot go from dead to alive" in prompt
    _, third = play("I wait.")
    assert "cannot go from dead to alive" not in third.snapshot.messages[-1]["content"]


def test_a_reply_without_a_block_keeps_the_state_and_says_so(campaign, play, model):
    model.script({"reply": "The tide turns."})
    _, narration = play("I wait.")
    assert narration.status == Action.Status.DONE
    assert narration.state == campaign.initial_state
    assert "no state block" in narration.snapshot.report["state_events"]["note"]


def test_undo_takes_the_state_back_with_the_head(campaign, play, model):
    model.script({"reply": BLOCK})
    play("I pay the ferryman.")
    services.turn_undo(campaign=campaign, now=timezone.now())
    campaign.refresh_from_db()
    assert campaign.state_at(campaign.head) == campaign.initial_state


def test_the_inspector_lists_this_turns_state_changes(client, campaign, play, model):
    from django.urls import reverse

    model.script({"reply": BLOCK})
    _, narration = play("I pay the ferryman.")
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "2 applied, 1 refused" in page and "cannot go from dead to alive" in page


def test_replayed_history_is_prose_only(campaign, play, model):
    model.script({"reply": BLOCK})
    _, first = play("I pay the ferryman.")
    _, second = play("I look back at the quay.")
    replayed = [m["content"] for m in second.snapshot.messages if m["role"] == "assistant"]
    assert replayed == [first.text]
    story = second.snapshot.story_text
    assert "The ferryman takes your coin." in story and '"type": "entity"' not in story
