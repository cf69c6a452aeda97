"""Playing a story: submit, undo, redo, retry, alternatives, edit, branch.

Narration runs against the loopback demo server; `play` commits the turn and
runs the queued narration as a worker would.
"""

import pytest
from django.urls import reverse
from django.utils import timezone

from storyapp import lineage, services
from storyapp.models import Action
from tests.factories import CampaignFactory, UserFactory


def _story(campaign):
    campaign.refresh_from_db()
    return [a.text for a in lineage.tail(campaign.pk, campaign.head_id, 100)]


def _command(campaign, command, django_capture_on_commit_callbacks, **kwargs):
    with django_capture_on_commit_callbacks(execute=True):
        result = command(campaign=campaign, now=timezone.now(), **kwargs)
    campaign.refresh_from_db()
    return result


def test_a_turn_stores_the_player_action_and_a_finished_narration(campaign, play, model):
    model.script({"reply": "The gulls scream over the grey water.\n<state>{\"events\": []}</state>"})
    player, narration = play("I walk to the quay.")
    assert player.text == "I walk to the quay."
    assert narration.status == Action.Status.DONE
    assert narration.text == "The gulls scream over the grey water."
    assert narration.parent_id == player.pk
    assert campaign.head_id == narration.pk
    assert narration.snapshot.story_text.rstrip().endswith(narration.snapshot.report["sections"][-1]["text"])


def test_the_state_block_never_reaches_the_stored_prose(campaign, play, model):
    model.script({"reply": "Rain.\n<state>{\"events\": [{\"type\": \"scene\", \"location\": \"Quay\"}]}</state>"})
    _, narration = play("Look up.")
    assert "<state>" not in narration.text and narration.text == "Rain."


def test_abandoned_turns_never_reach_the_next_prompt(campaign, play, model, django_capture_on_commit_callbacks):
    for number in range(1, 4):
        model.script({"reply": f"Narration {number} about the harbour."})
        play(f"Player move {number}.")
    _command(campaign, services.turn_undo, django_capture_on_commit_callbacks)
    assert _story(campaign)[-1] == "Narration 2 about the harbour."
    model.reset()
    model.script({"reply": "A different third narration."})
    play("A different third move.")
    [sent] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    prompt = " ".join(m["content"] for m in sent["messages"])
    assert "Player move 2." in prompt and "Narration 2 about the harbour." in prompt
    assert "Player move 3." not in prompt and "Narration 3 about the harbour." not in prompt
    assert _story(campaign)[-2:] == ["A different third move.", "A different third narration."]
    assert Action.objects.filter(campaign=campaign, text="Player move 3.").exists()


def test_undo_then_redo_returns_to_the_same_action(campaign, play, model, django_capture_on_commit_callbacks):
    play("First.")
    head = campaign.head_id
    _command(campaign, services.turn_undo, django_capture_on_commit_callbacks)
    assert campaign.head_id != head
    _command(campaign, services.turn_redo, django_capture_on_commit_callbacks)
    assert campaign.head_id == head


def test_redo_follows_the_branch_visited_last(campaign, play, model, django_capture_on_commit_callbacks):
    player, first = play("Open the door.")
    _command(campaign, services.turn_retry, django_capture_on_commit_callbacks)
    second = campaign.head_id
    _command(campaign, services.turn_undo, django_capture_on_commit_callbacks)
    _command(campaign, services.turn_redo, django_capture_on_commit_callbacks)
    assert campaign.head_id == second != first.pk


def test_retry_keeps_the_old_narration_as_an_alternative(campaign, play, model, django_capture_on_commit_callbacks):
    model.script({"reply": "First telling."}, {"reply": "Second telling."})
    player, first = play("Knock.")
    second = _command(campaign, services.turn_retry, django_capture_on_commit_callbacks)
    second.refresh_from_db()
    assert second.text == "Second telling." and second.parent_id == player.pk
    assert [a.text for a in services.alternatives(second)] == ["First telling.", "Second telling."]
    _command(campaign, services.alternative_select, django_capture_on_commit_callbacks, action=first)
    assert _story(campaign)[-1] == "First telling."


def test_editing_an_action_changes_what_the_next_prompt_reads(campaign, play, model):
    player, narration = play("I draw my sword.")
    services.action_edit(campaign=campaign, action=player, text="I draw my knife.")
    model.reset()
    play("I wait.")
    [sent] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    prompt = sent["messages"][1]["content"]
    assert "I draw my knife." in prompt and "I draw my sword." not in prompt


def test_a_new_turn_is_refused_while_the_narrator_is_writing(campaign):
    services.turn_submit(campaign=campaign, text="One.", now=timezone.now())
    with pytest.raises(services.TurnRefused, match="still writing"):
        services.turn_submit(campaign=campaign, text="Two.", now=timezone.now())


def test_an_empty_turn_asks_the_narrator_to_continue(campaign, play, model):
    player, narration = play("")
    assert player is None and narration.status == Action.Status.DONE and narration.parent_id is None


def test_stop_before_a_worker_starts_stops_at_once(campaign):
    _, narration = services.turn_submit(campaign=campaign, text="One.", now=timezone.now())
    assert services.narration_stop(action=narration, now=timezone.now())
    narration.refresh_from_db()
    assert narration.status == Action.Status.STOPPED
    services.turn_submit(campaign=campaign, text="Two.", now=timezone.now())


def test_a_refused_turn_without_javascript_keeps_the_typed_text(client, campaign):
    services.turn_submit(campaign=campaign, text="One.", now=timezone.now())
    client.force_login(campaign.owner)
    page = client.post(reverse("turn_submit", args=[campaign.pk]), {"text": "My carefully typed second move."})
    assert page.status_code == 409  # not now: the narrator is still writing
    body = page.content.decode()
    assert "still writing" in body and "My carefully typed second move.</textarea>" in body


def test_editing_a_failed_narration_makes_it_part_of_the_story(campaign, play, model):
    model.script({"reply": "The fog rolls in over the quay, thick as wool.", "cut_after": 20})
    _, narration = play("Look.")
    assert narration.status == Action.Status.FAILED
    services.action_edit(campaign=campaign, action=narration, text="The fog rolls in, thick as wool.")
    narration.refresh_from_db()
    assert narration.status == Action.Status.DONE and not narration.error
    player, _ = play("I walk on.")
    assert player.parent_id == narration.pk


def test_a_turn_sent_while_the_broker_is_down_is_kept_says_so_and_is_narrated_when_it_is_back(
    client, campaign, monkeypatch, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from kombu.exceptions import OperationalError

    from storyapp import narration as narrating
    from storyapp import tasks

    def refuse(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.narrate_action, "delay", refuse)
    client.force_login(campaign.owner)
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(reverse("turn_submit", args=[campaign.pk]), {"text": "I light the lamp."},
                           headers={"HX-Request": "true"})
    assert page.status_code == 200
    # (In a request the narration is sent as the turn commits, before this
    # page renders; here the test's transaction holds it until the block ends.)
    shown = client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert "narration service is unavailable" in shown and "I light the lamp." in shown
    narration = Action.objects.get(campaign=campaign, kind=Action.Kind.AI)
    assert narration.status == Action.Status.PENDING and narration.error == services.BROKER_DOWN
    assert narration.parent.text == "I light the lamp."
    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        narrating.recover_stale(now=timezone.now() + timedelta(seconds=30))
    narration.refresh_from_db()
    assert narration.status == Action.Status.DONE and not narration.error


def test_one_reader_cannot_hold_more_narrations_than_the_cap(alice, endpoint, settings, monkeypatch):
    from storyapp import tasks

    monkeypatch.setattr(tasks.narrate_action, "delay", lambda action_id: None)  # they stay pending
    settings.LOREMASTER_NARRATIONS_PER_READER = 2
    stories = [CampaignFactory(owner=alice, endpoint=endpoint) for _ in range(3)]
    services.turn_submit(campaign=stories[0], text="One.", now=timezone.now())
    services.turn_submit(campaign=stories[1], text="Two.", now=timezone.now())
    with pytest.raises(services.TurnRefused, match="already have 2 narrations"):
        services.turn_submit(campaign=stories[2], text="Three.", now=timezone.now())
    assert not Action.objects.filter(campaign=stories[2]).exists(), "a refused turn writes nothing"
    other = CampaignFactory(owner=UserFactory(username="bea"), endpoint=endpoint)
    services.turn_submit(campaign=other, text="Mine.", now=timezone.now())
