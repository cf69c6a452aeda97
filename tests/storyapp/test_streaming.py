"""The narration stream: what is stored so far, then new text, resumable by event id."""

import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from ops import sweeper
from ops.models import WorkerHeartbeat
from storyapp import narration, services
from storyapp.models import Action
from storyapp.views import stream
from tests import sse
from tests.factories import ActionFactory


def test_a_finished_narration_streams_its_text_then_done(client, campaign):
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="The tide <b>turns</b>.\nGulls.")
    client.force_login(campaign.owner)
    events = sse.events(client, reverse("action_stream", args=[campaign.pk, action.pk]))
    assert events[0] == ("chunk", str(len(action.text)), "The tide &lt;b&gt;turns&lt;/b&gt;.\nGulls.")
    assert events[-1][0] == "done"


def test_a_reconnect_resumes_after_the_last_event_id(client, campaign):
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="0123456789")
    client.force_login(campaign.owner)
    url = reverse("action_stream", args=[campaign.pk, action.pk])
    assert sse.events(client, url, HTTP_LAST_EVENT_ID="4")[0] == ("chunk", "10", "456789")
    assert sse.events(client, url + "?offset=10")[0][0] == "done"


def test_a_stream_keeps_following_a_narration_whose_worker_died(client, campaign, monkeypatch):
    """The workers' sweep hands it to another worker within seconds, so the
    page waits for that rather than giving up (and reloading to no avail)."""
    monkeypatch.setattr(stream, "STREAM_MAX_SECONDS", 0.6)
    action = ActionFactory(
        campaign=campaign, kind=Action.Kind.AI, text="Half a sen", status=Action.Status.STREAMING,
        heartbeat=timezone.now() - timedelta(minutes=5),
    )
    client.force_login(campaign.owner)
    started = time.monotonic()
    events = sse.events(client, reverse("action_stream", args=[campaign.pk, action.pk]))
    assert time.monotonic() - started >= 0.5
    assert [e[0] for e in events] == ["status", "chunk", "done"]


def test_a_stream_ends_when_a_new_worker_starts_the_narration_afresh(client, campaign):
    """Its text is shorter than what the page has: the page reloads the story."""
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="A n", status=Action.Status.STREAMING,
                           heartbeat=timezone.now())
    client.force_login(campaign.owner)
    events = sse.events(client, reverse("action_stream", args=[campaign.pk, action.pk]) + "?offset=10")
    assert [e[0] for e in events] == ["status", "done"]


@pytest.mark.parametrize(("queues", "says"), [
    ("", "No narration worker is running"),
    ("celery", "No narration worker is running"),
    ("celery,narration", "Waiting for a worker"),
])
def test_a_waiting_narration_says_whether_any_worker_can_take_it(client, campaign, monkeypatch, queues, says):
    monkeypatch.setattr(stream, "STREAM_MAX_SECONDS", 0.3)
    if queues:
        WorkerHeartbeat.objects.create(name="w@host:1", seen=timezone.now(), queues=queues)
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.PENDING,
                           heartbeat=timezone.now())
    client.force_login(campaign.owner)
    events = sse.events(client, reverse("action_stream", args=[campaign.pk, action.pk]))
    assert events[0][0] == "status" and events[0][2].startswith(says)


def test_a_narration_whose_worker_died_is_narrated_again(campaign, model):
    action = ActionFactory(
        campaign=campaign, kind=Action.Kind.AI, text="Half a sen", status=Action.Status.STREAMING,
        heartbeat=timezone.now() - timedelta(minutes=5),
    )
    model.script({"reply": "A whole sentence, this time."})
    assert narration.recover_stale(campaign.pk, now=timezone.now()) == 1
    action.refresh_from_db()
    assert action.status == Action.Status.DONE and action.text == "A whole sentence, this time."


def test_a_live_narration_is_not_taken_by_a_second_worker(campaign):
    action = ActionFactory(
        campaign=campaign, kind=Action.Kind.AI, text="Going", status=Action.Status.STREAMING,
        heartbeat=timezone.now(),
    )
    assert narration.claim(action.pk, now=timezone.now()) is None
    assert narration.recover_stale(campaign.pk, now=timezone.now()) == 0


def test_running_the_narration_task_twice_narrates_once(campaign, model, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        _, action = services.turn_submit(campaign=campaign, text="Knock.", now=timezone.now())
    narration.narrate(action.pk)
    chat = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    assert len(chat) == 1
    action.refresh_from_db()
    assert action.status == Action.Status.DONE


def test_stop_on_a_narration_whose_worker_died_ends_it(campaign):
    action = ActionFactory(
        campaign=campaign, kind=Action.Kind.AI, text="Half", status=Action.Status.STREAMING,
        heartbeat=timezone.now() - timedelta(minutes=5),
    )
    assert services.narration_stop(action=action, now=timezone.now())
    action.refresh_from_db()
    assert action.status == Action.Status.STOPPED and action.text == "Half"


def test_a_carriage_return_in_narration_cannot_forge_a_stream_field(client, campaign):
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="Calm.\revent: done\rid: 999999\rMore.")
    client.force_login(campaign.owner)
    events = sse.events(client, reverse("action_stream", args=[campaign.pk, action.pk]))
    assert events[0] == ("chunk", str(len(action.text)), "Calm.\nevent: done\nid: 999999\nMore.")
    assert [e[0] for e in events] == ["chunk", "done"]


def test_an_unexpected_error_fails_the_narration_instead_of_leaving_it_busy(
    campaign, monkeypatch, django_capture_on_commit_callbacks
):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("storyapp.narration.prompting.turn_inputs", broken)
    with django_capture_on_commit_callbacks(execute=True):
        _, action = services.turn_submit(campaign=campaign, text="Knock.", now=timezone.now())
    action.refresh_from_db()
    assert action.status == Action.Status.FAILED and "Retry" in action.error


def test_a_profile_the_allowlist_no_longer_passes_fails_the_turn_saying_so(
    campaign, settings, django_capture_on_commit_callbacks
):
    settings.ENDPOINT_ALLOWLIST = ["api.openai.com"]  # the profile's loopback URL no longer passes
    with django_capture_on_commit_callbacks(execute=True):
        _, action = services.turn_submit(campaign=campaign, text="Knock.", now=timezone.now())
    action.refresh_from_db()
    assert action.status == Action.Status.FAILED and "is not on this server's endpoint allowlist" in action.error


def test_the_workers_sweep_recovers_a_lost_narration_without_a_page_load(campaign, model, client):
    action = ActionFactory(
        campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.PENDING,
        heartbeat=timezone.now() - timedelta(minutes=5),
    )
    client.force_login(campaign.owner)
    client.get(reverse("campaign_play", args=[campaign.pk]))
    action.refresh_from_db()
    assert action.status == Action.Status.PENDING, "the play page does not write on GET"
    model.script({"reply": "Found again."})
    sweeper.sweep_once(timezone.now())
    action.refresh_from_db()
    assert action.status == Action.Status.DONE and action.text == "Found again."


def test_a_narration_still_thinking_says_so_and_sends_its_thinking(client, campaign, monkeypatch):
    monkeypatch.setattr(stream, "STREAM_MAX_SECONDS", 0.5)
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.STREAMING,
                           thinking="Tide first, <then> the gulls.", heartbeat=timezone.now())
    client.force_login(campaign.owner)
    events = sse.events(client, reverse("action_stream", args=[campaign.pk, action.pk]))
    assert ("status", "", "The narrator is thinking…") in events
    assert ("thinking", "", "Tide first, &lt;then&gt; the gulls.") in events
    assert not [e for e in events if e[0] == "chunk"]


def test_a_narration_waiting_for_a_busy_model_server_says_so(client, campaign, monkeypatch):
    monkeypatch.setattr(stream, "STREAM_MAX_SECONDS", 0.5)
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.STREAMING,
                           waiting_for_server=True, heartbeat=timezone.now())
    client.force_login(campaign.owner)
    events = sse.events(client, reverse("action_stream", args=[campaign.pk, action.pk]))
    assert ("status", "", "Waiting for the model server: it is answering another request, and yours is next…") in events
