"""Undo and redo step over whole turns, a Send never stacks two reader's
actions, Stop ends a narration at once, and odd query parameters are refused
with a 400 or 404 instead of a 500."""

import threading
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from storyapp import lineage, narration, services
from storyapp.models import Action
from tests.factories import ActionFactory


def _kinds(campaign):
    campaign.refresh_from_db()
    return [(a.kind, a.text) for a in lineage.tail(campaign.pk, campaign.head_id, 100)]


def test_undo_takes_back_the_narration_and_the_action_that_asked_for_it(campaign, play, model):
    model.script({"reply": "One told."}, {"reply": "Two told."})
    play("First move.")
    play("Second move.")
    undone = services.turn_undo(campaign=campaign, now=timezone.now())
    assert undone.player_text == "Second move."
    assert _kinds(campaign) == [("player", "First move."), ("ai", "One told.")]


def test_redo_brings_back_the_whole_turn(campaign, play, model):
    model.script({"reply": "One told."}, {"reply": "Two told."})
    play("First move.")
    _, second = play("Second move.")
    services.turn_undo(campaign=campaign, now=timezone.now())
    assert services.turn_redo(campaign=campaign, now=timezone.now()).pk == second.pk
    assert _kinds(campaign)[-2:] == [("player", "Second move."), ("ai", "Two told.")]


def test_a_send_after_a_failed_narration_replaces_the_unanswered_action(campaign, play, model):
    model.script({"status": 500})
    play("A move the server failed on.")
    model.script({"reply": "Answered."})
    play("A better move.")
    assert _kinds(campaign) == [("player", "A better move."), ("ai", "Answered.")]


def test_a_send_at_a_bare_action_never_stacks_a_second_one(campaign, play, model):
    bare = ActionFactory(campaign=campaign, kind=Action.Kind.PLAYER, text="Left unanswered.")
    campaign.head = bare
    campaign.save()
    model.script({"reply": "Answered."})
    play("Typed again.")
    assert _kinds(campaign) == [("player", "Typed again."), ("ai", "Answered.")]


def test_undo_over_htmx_hands_the_words_back_to_the_turn_box(client, campaign, play, model):
    play("I climb the mast.")
    client.force_login(campaign.owner)
    response = client.post(reverse("turn_undo", args=[campaign.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response.headers["HX-Trigger"] == '{"turn-restored": {"text": "I climb the mast."}}'


def test_undo_without_javascript_puts_the_words_back_in_the_box_after_the_redirect(client, campaign, play, model):
    play("I climb the mast.")
    client.force_login(campaign.owner)
    page = client.post(reverse("turn_undo", args=[campaign.pk]), follow=True).content.decode()
    assert ">I climb the mast.</textarea>" in page
    again = client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert ">I climb the mast.</textarea>" not in again


def test_stop_ends_a_streaming_narration_at_once_and_keeps_what_was_shown(campaign):
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="The tide", status=Action.Status.STREAMING,
                           heartbeat=timezone.now())
    assert services.narration_stop(action=action, now=timezone.now())
    action.refresh_from_db()
    assert action.status == Action.Status.STOPPED and action.text == "The tide"


@pytest.mark.django_db(transaction=True)
def test_a_stalled_model_cannot_hold_the_narration_past_stop(campaign, model):
    """The worker is blocked waiting on a model that sends nothing; Stop ends
    the narration for the reader at once, and when the worker wakes it keeps
    the shown text instead of what the model sent after the click."""
    model.script({"reply": "First words. " + "Late words. " * 20, "delay": 0.1, "pause_after": 2, "pause": 3.0})
    player = ActionFactory(campaign=campaign, kind=Action.Kind.PLAYER, text="Go.")
    told = ActionFactory(campaign=campaign, kind=Action.Kind.AI, parent=player, depth=1, text="",
                         status=Action.Status.PENDING, heartbeat=timezone.now())
    worker = threading.Thread(target=narration.narrate, args=(told.pk,))
    worker.start()
    deadline = time.monotonic() + 10
    while not Action.objects.get(pk=told.pk).text and time.monotonic() < deadline:
        time.sleep(0.05)
    shown = Action.objects.get(pk=told.pk).text
    started = time.monotonic()
    services.narration_stop(action=Action.objects.get(pk=told.pk), now=timezone.now())
    stopped = Action.objects.get(pk=told.pk)
    assert time.monotonic() - started < 1 and stopped.status == Action.Status.STOPPED
    worker.join(timeout=30)
    final = Action.objects.get(pk=told.pk)
    assert final.status == Action.Status.STOPPED and final.text.strip() == shown.strip()
    assert final.text.count("Late words") < 20, "the words sent after Stop were kept"


@pytest.mark.parametrize("query", ["?before=abc", "?before=²", "?before=" + "9" * 5000])
def test_an_odd_earlier_page_parameter_is_refused_not_a_server_error(client, campaign, play, model, query):
    play("One.")
    client.force_login(campaign.owner)
    response = client.get(reverse("story_earlier", args=[campaign.pk]) + query)
    assert response.status_code in (400, 404)


@pytest.mark.parametrize("headers", [{"QUERY_STRING": "offset=²"}, {"HTTP_LAST_EVENT_ID": "9" * 5000},
                                     {"HTTP_LAST_EVENT_ID": "-3"}])
def test_an_odd_stream_offset_is_refused_not_a_server_error(client, campaign, headers):
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="Told.")
    client.force_login(campaign.owner)
    url = reverse("action_stream", args=[campaign.pk, action.pk])
    query = headers.pop("QUERY_STRING", "")
    response = client.get(url + ("?" + query if query else ""), **headers)
    assert response.status_code == 400


def test_a_hint_the_model_echoes_never_reaches_the_stored_prose(campaign, play, model):
    model.script({"reply": "[Hard limit: this turn must not exceed 300 words.]\nThe gulls cry.\n<state>{\"events\": []}</state>"})
    _, told = play("I look up.")
    assert told.text == "The gulls cry."
