"""The campaign's event log: one event per change to the story, each member
seeing what is theirs, streamed to the page resumably, and who is here."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from storyapp import campaignevents, services
from storyapp.access import place_in
from storyapp.models import Action, CampaignEvent, Membership
from storyapp.views import events as events_view
from tests import sse
from tests.factories import ActionFactory, CampaignFactory, MembershipFactory, UserFactory


def _kinds(campaign) -> list[str]:
    return list(CampaignEvent.objects.filter(campaign=campaign).values_list("kind", flat=True))


def _command(campaign, command, django_capture_on_commit_callbacks, **kwargs):
    with django_capture_on_commit_callbacks(execute=True):
        result = command(campaign=campaign, now=timezone.now(), **kwargs)
    campaign.refresh_from_db()
    return result


@pytest.fixture
def bob_plays(campaign, bob):
    return MembershipFactory(campaign=campaign, user=bob, role=Membership.Role.PLAYER, seat_name="Mira")


@pytest.fixture
def short_streams(monkeypatch):
    monkeypatch.setattr(events_view, "EVENTS_MAX_SECONDS", 0.3)
    monkeypatch.setattr(events_view, "EVENTS_POLL_SECONDS", 0.05)


def _changes(found) -> list[tuple[int, str]]:
    return [(int(event_id), json.loads(data)["kind"]) for event, event_id, data in found if event == "change"]


def test_a_turn_is_told_once_as_the_action_its_narration_started_and_finished(campaign, play, model):
    player, narration = play("I walk to the quay.")
    stored = list(CampaignEvent.objects.filter(campaign=campaign).values_list("kind", "data"))
    assert stored == [
        ("action", {"action": player.pk}),
        ("narration-started", {"action": narration.pk}),
        ("narration-finished", {"action": narration.pk}),
    ]


def test_undo_redo_retry_edit_and_delete_are_each_told_once(campaign, play, model, django_capture_on_commit_callbacks):
    play("I walk to the quay.")
    CampaignEvent.objects.all().delete()
    _command(campaign, services.turn_undo, django_capture_on_commit_callbacks)
    _command(campaign, services.turn_redo, django_capture_on_commit_callbacks)
    _command(campaign, services.turn_retry, django_capture_on_commit_callbacks)
    head = Action.objects.get(pk=campaign.head_id)
    with django_capture_on_commit_callbacks(execute=True):
        services.action_edit(campaign=campaign, action=head, text="The gulls are quiet.")
    first = services.alternatives(head)[0]
    _command(campaign, services.alternative_select, django_capture_on_commit_callbacks, action=first)
    with django_capture_on_commit_callbacks(execute=True):
        services.action_delete(campaign=campaign, action=first, now=timezone.now())
    assert _kinds(campaign) == [
        "undo", "redo", "retry", "narration-finished", "action-edited", "head-moved", "action-deleted",
    ]


def test_a_refused_change_tells_nothing(campaign, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(services.TurnRefused):
        services.turn_undo(campaign=campaign, now=timezone.now())
    assert _kinds(campaign) == []


def test_a_stop_is_told_once_though_the_worker_finishes_after_it(campaign, django_capture_on_commit_callbacks):
    narration = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="Half", status=Action.Status.STREAMING,
                              heartbeat=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert services.narration_stop(action=narration, now=timezone.now())
        assert not services.narration_stop(action=narration, now=timezone.now())
    assert _kinds(campaign) == ["narration-stopped"]


def test_each_member_sees_the_events_for_everyone_and_for_their_own_seat(campaign, bob_plays, alice,
                                                                          django_capture_on_commit_callbacks):
    watcher = MembershipFactory(campaign=campaign, user=UserFactory(username="carol"),
                                        role=Membership.Role.WATCHER)
    with django_capture_on_commit_callbacks(execute=True):
        for audience in ("", "gm", "Mira", "Tobin"):
            campaignevents.emit(campaign.pk, "note", {"for": audience}, audience=audience)

    def seen(user):
        return [e.data["for"] for e in campaignevents.visible_to(place_in(campaign, user))]

    assert seen(alice) == ["", "gm", "Mira", "Tobin"]
    assert seen(bob_plays.user) == ["", "Mira"]
    assert seen(watcher.user) == [""]


def test_the_stream_resumes_exactly_after_the_last_event_id(client, campaign, alice, short_streams,
                                                            django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        for kind in ("undo", "redo", "retry"):
            campaignevents.emit(campaign.pk, kind)
    ids = list(CampaignEvent.objects.filter(campaign=campaign).values_list("id", flat=True))
    client.force_login(alice)
    url = reverse("campaign_events", args=[campaign.pk])
    assert _changes(sse.events(client, url)) == [(ids[0], "undo"), (ids[1], "redo"), (ids[2], "retry")]
    assert _changes(sse.events(client, url, HTTP_LAST_EVENT_ID=str(ids[0]))) == [(ids[1], "redo"), (ids[2], "retry")]
    assert _changes(sse.events(client, f"{url}?after={ids[1]}")) == [(ids[2], "retry")]
    # The browser's reconnect (Last-Event-ID) outranks the page's start (?after=).
    assert _changes(sse.events(client, f"{url}?after=0", HTTP_LAST_EVENT_ID=str(ids[2]))) == []


def test_a_member_is_streamed_only_what_they_may_see(client, campaign, bob_plays, short_streams,
                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        campaignevents.emit(campaign.pk, "whisper", audience="gm")
        campaignevents.emit(campaign.pk, "undo")
    client.force_login(bob_plays.user)
    assert [kind for _, kind in _changes(sse.events(client, reverse("campaign_events", args=[campaign.pk])))] == ["undo"]


def test_a_reader_outside_the_campaign_is_told_it_does_not_exist(client, campaign):
    client.force_login(UserFactory(username="charlie"))
    assert client.get(reverse("campaign_events", args=[campaign.pk])).status_code == 404
    client.logout()
    assert client.get(reverse("campaign_events", args=[campaign.pk])).status_code == 302


def test_the_stream_marks_its_member_here_and_says_who_is(client, campaign, alice, bob_plays, short_streams):
    campaign.game_master_seen = timezone.now()
    campaign.save(update_fields=["game_master_seen"])
    client.force_login(bob_plays.user)
    found = sse.events(client, reverse("campaign_events", args=[campaign.pk]))
    bob_plays.refresh_from_db()
    assert bob_plays.last_seen is not None
    presence = [json.loads(data) for event, _, data in found if event == "presence"]
    assert presence[-1] == [
        {"name": "alice", "role": "gm", "seat": ""},
        {"name": "bob", "role": "player", "seat": "Mira"},
    ]


def test_a_member_arrives_once_however_often_their_pages_mark_them(campaign, bob_plays,
                                                                   django_capture_on_commit_callbacks):
    place = place_in(campaign, bob_plays.user)
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        assert campaignevents.mark_seen(place, now=now)
        assert not campaignevents.mark_seen(place, now=now + timedelta(seconds=1))
        assert not campaignevents.mark_seen(place, now=now + timedelta(seconds=15))
    assert _kinds(campaign) == ["presence"]
    bob_plays.refresh_from_db()
    assert bob_plays.last_seen == now + timedelta(seconds=15), "marked again after MARK_EVERY_SECONDS"
    assert [m["name"] for m in campaignevents.present(campaign, now=now + timedelta(seconds=30))] == ["bob"]
    assert campaignevents.present(campaign, now=now + timedelta(seconds=40)) == []
    with django_capture_on_commit_callbacks(execute=True):
        assert campaignevents.mark_seen(place, now=now + timedelta(seconds=40)), "back after leaving"


def test_a_shared_campaign_counts_once_against_its_game_masters_cap(alice, endpoint, settings, monkeypatch):
    from storyapp import tasks

    monkeypatch.setattr(tasks.narrate_action, "delay", lambda action_id: None)  # they stay pending
    settings.LOREMASTER_NARRATIONS_PER_READER = 2
    shared = CampaignFactory(owner=alice, endpoint=endpoint)
    MembershipFactory(campaign=shared, user=UserFactory(username="bob"), role=Membership.Role.PLAYER)
    for _ in range(2):  # an abandoned narration still in flight beside the story's
        ActionFactory(campaign=shared, kind=Action.Kind.AI, text="", status=Action.Status.PENDING,
                      heartbeat=timezone.now())
    services.turn_submit(campaign=CampaignFactory(owner=alice, endpoint=endpoint), text="Two.", now=timezone.now())
    third = CampaignFactory(owner=alice, endpoint=endpoint)
    MembershipFactory(campaign=third, user=UserFactory(username="carol"), role=Membership.Role.PLAYER)
    with pytest.raises(services.TurnRefused, match="game master already has 2 stories being narrated"):
        services.turn_submit(campaign=third, text="Three.", now=timezone.now())


def test_the_game_master_cannot_undo_while_a_players_narration_streams(client, campaign, alice, bob_plays,
                                                                        settings, monkeypatch):
    from storyapp import tasks

    monkeypatch.setattr(tasks.narrate_action, "delay", lambda action_id: None)
    client.force_login(bob_plays.user)
    client.post(reverse("turn_submit", args=[campaign.pk]), {"text": "I open the gate."})
    campaign.refresh_from_db()
    narration = Action.objects.get(pk=campaign.head_id)
    Action.objects.filter(pk=narration.pk).update(status=Action.Status.STREAMING, heartbeat=timezone.now())
    client.force_login(alice)
    response = client.post(reverse("turn_undo", args=[campaign.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 409
    assert "The narrator is still writing" in response.content.decode()
    campaign.refresh_from_db()
    assert campaign.head_id == narration.pk


def test_a_narration_an_operator_ends_is_told_failed_once(campaign, django_capture_on_commit_callbacks):
    from storyapp import narration as narrating

    stuck = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.STREAMING,
                          heartbeat=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert narrating.operator_fail(stuck.pk)
        assert not narrating.operator_fail(stuck.pk)
    assert list(CampaignEvent.objects.values_list("kind", "data")) == [("narration-failed", {"action": stuck.pk})]


def test_the_play_page_and_its_story_say_where_in_the_log_they_stand(client, campaign, alice,
                                                                      django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        campaignevents.emit(campaign.pk, "undo")
    latest = CampaignEvent.objects.get().pk
    client.force_login(alice)
    page = client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert f'data-after="{latest}"' in page and f'data-event="{latest}"' in page
    story = client.get(reverse("campaign_play", args=[campaign.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert f'data-event="{latest}"' in story and 'id="live"' not in story


def test_a_turn_kept_while_the_narrator_writes_is_told(campaign, bob_plays, django_capture_on_commit_callbacks):
    from storyapp import turnorder

    ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.STREAMING,
                  heartbeat=timezone.now())
    campaign.head = Action.objects.get(campaign=campaign)
    campaign.save(update_fields=["head"])
    with django_capture_on_commit_callbacks(execute=True):
        turnorder.submit(place=place_in(campaign, bob_plays.user), text="I wait my turn.", now=timezone.now())
    assert list(CampaignEvent.objects.values_list("kind", "data")) == [("turn-waiting", {"seat": "Mira"})]
