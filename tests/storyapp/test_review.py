"""Review mode: a finished narration waits for the game master before the
players and watchers read it, by page, by its own URL and by its stream."""

import pytest
from django.urls import reverse
from django.utils import timezone

from storyapp import narration as narrating
from storyapp import services
from storyapp.models import Action, CampaignEvent
from storyapp.review import HELD_NOTICE
from storyapp.views import stream
from tests import sse
from tests.factories import MembershipFactory, UserFactory

NARRATION = "The lighthouse keeper turns, and the lamp goes dark over the bay."


@pytest.fixture
def campaign(campaign):
    campaign.review = True
    campaign.save(update_fields=["review"])
    return campaign


@pytest.fixture
def carol(campaign):
    return MembershipFactory(campaign=campaign, user=UserFactory(username="carol"), seat_name="Ivo").user


@pytest.fixture
def dave(campaign):
    return MembershipFactory(campaign=campaign, user=UserFactory(username="dave"), role="watcher", seat_name="").user


@pytest.fixture
def held(campaign, carol, dave, play, model):
    model.script({"reply": NARRATION})
    _, narration = play("I climb the lighthouse stairs.")
    return narration


def _stream(client, campaign, action) -> str:
    response = client.get(reverse("action_stream", args=[campaign.pk, action.pk]))
    return sse.body(response)


def _page(client, campaign) -> str:
    return client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()


def _detail(client, campaign, action) -> str:
    return client.get(reverse("action_detail", args=[campaign.pk, action.pk]), HTTP_HX_REQUEST="true").content.decode()


def test_a_finished_narration_is_held_for_the_game_master(held):
    assert held.status == Action.Status.DONE and held.held_for_review and held.reviewed is None


@pytest.mark.parametrize("member", ["carol", "dave"])
def test_players_and_watchers_cannot_read_a_held_narration(client, campaign, held, member, request):
    client.force_login(request.getfixturevalue(member))
    page, detail, stream = _page(client, campaign), _detail(client, campaign, held), _stream(client, campaign, held)
    assert HELD_NOTICE in page and HELD_NOTICE in detail
    for text in (page, detail, stream):
        assert "lighthouse keeper" not in text
    assert "event: done" in stream
    inspector = client.get(reverse("context_inspector", args=[campaign.pk, held.pk]))
    assert inspector.status_code == 404
    for export in ("story_export_markdown", "story_export_html"):
        assert "lighthouse keeper" not in client.get(reverse(export, args=[campaign.pk])).content.decode()


def test_the_game_master_reads_it_and_approves_it_then_the_players_read_it(client, campaign, held, carol):
    client.force_login(campaign.owner)
    page = _page(client, campaign)
    assert "lighthouse keeper" in page and "Held for your review" in page
    assert "lighthouse keeper" in _stream(client, campaign, held)
    client.post(reverse("narration_approve", args=[campaign.pk, held.pk]))
    held.refresh_from_db()
    assert not held.held_for_review and held.reviewed is not None
    client.force_login(carol)
    assert "lighthouse keeper" in _page(client, campaign) and "lighthouse keeper" in _stream(client, campaign, held)
    assert HELD_NOTICE not in _detail(client, campaign, held)


def test_an_edit_before_approval_is_what_the_players_read(client, campaign, held, carol):
    client.force_login(campaign.owner)
    client.post(reverse("action_edit", args=[campaign.pk, held.pk]), {"text": "The lamp flickers, then holds."})
    client.post(reverse("narration_approve", args=[campaign.pk, held.pk]))
    client.force_login(carol)
    page = _page(client, campaign)
    assert "The lamp flickers, then holds." in page and "lighthouse keeper" not in page


def test_a_regenerated_narration_is_held_in_turn(client, campaign, held, model, django_capture_on_commit_callbacks):
    model.script({"reply": "A gull cries once, and the stairs creak under you."})
    client.force_login(campaign.owner)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("turn_retry", args=[campaign.pk]))
    campaign.refresh_from_db()
    retried = Action.objects.get(pk=campaign.head_id)
    assert retried.pk != held.pk and retried.held_for_review and "gull" in retried.text


def test_only_the_game_master_may_approve(client, campaign, held, carol):
    client.force_login(carol)
    assert client.post(reverse("narration_approve", args=[campaign.pk, held.pk])).status_code == 403
    held.refresh_from_db()
    assert held.held_for_review


def test_a_narration_being_written_under_review_streams_no_text_to_players(client, campaign, carol, monkeypatch):
    monkeypatch.setattr(stream, "STREAM_MAX_SECONDS", 0.3)
    writing = Action.objects.create(campaign=campaign, kind=Action.Kind.AI, text="The keeper", status="streaming",
                                    thinking="Ivo must not learn of the wreck.", heartbeat=timezone.now())
    campaign.head = writing
    campaign.save(update_fields=["head"])
    client.force_login(carol)
    told = _stream(client, campaign, writing)
    assert "The narrator is writing" in told and "The keeper" not in told and "wreck" not in told
    assert "The keeper" not in _page(client, campaign)
    client.force_login(campaign.owner)
    told = _stream(client, campaign, writing)
    assert "The keeper" in told and "wreck" in told


def test_without_members_or_without_review_nothing_is_held(campaign, play, model):
    model.script({"reply": NARRATION})
    _, alone = play("I climb.")
    assert not alone.held_for_review
    campaign.review = False
    campaign.save(update_fields=["review"])
    MembershipFactory(campaign=campaign)
    model.script({"reply": NARRATION})
    _, shared = play("I climb again.")
    assert not shared.held_for_review


def test_a_later_prompt_that_replayed_a_held_narration_does_not_show_it_to_players(
    client, campaign, held, carol, play, model,
):
    model.script({"reply": "The stairs end at a locked door."})
    _, later = play("I try the door.")
    assert NARRATION in "\n".join(m["content"] for m in later.snapshot.messages)
    client.force_login(campaign.owner)
    client.post(reverse("narration_approve", args=[campaign.pk, later.pk]))
    client.force_login(carol)
    page = client.get(reverse("context_inspector", args=[campaign.pk, later.pk])).content.decode()
    assert "lighthouse keeper" not in page and "still reviewing" in page
    client.force_login(campaign.owner)
    assert "lighthouse keeper" in client.get(reverse("context_inspector", args=[campaign.pk, later.pk])).content.decode()


def test_the_state_a_held_narration_set_is_not_shown_to_players(client, campaign, carol, play, model):
    model.script({"reply": 'The keeper hands you a brass key.\n<state>{"events": [{"type": "scene", '
                           '"location": "The lamp room"}]}</state>'})
    _, narration = play("I climb.")
    assert narration.held_for_review and narration.state["scene"]["location"] == "The lamp room"
    client.force_login(carol)
    panel = client.get(reverse("campaign_state", args=[campaign.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert "The lamp room" not in panel and "The lamp room" not in _page(client, campaign)
    client.force_login(campaign.owner)
    assert "The lamp room" in client.get(reverse("campaign_state", args=[campaign.pk]),
                                         HTTP_HX_REQUEST="true").content.decode()


def test_approving_tells_the_players_pages_once(client, campaign, held, django_capture_on_commit_callbacks):
    client.force_login(campaign.owner)
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            client.post(reverse("narration_approve", args=[campaign.pk, held.pk]))
    told = CampaignEvent.objects.filter(campaign=campaign, kind="narration-approved")
    assert list(told.values_list("data", "audience")) == [({"action": held.pk}, CampaignEvent.EVERYONE)]


def test_the_game_master_turns_review_on_in_the_campaigns_settings(client, alice, campaign):
    campaign.review = False
    campaign.save(update_fields=["review"])
    client.force_login(alice)
    page = client.get(reverse("campaign_edit", args=[campaign.pk])).content.decode()
    assert 'name="review"' in page
    data = {"title": campaign.title, "review": "on", "narration_length": ""}
    response = client.post(reverse("campaign_edit", args=[campaign.pk]), data)
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert campaign.review


@pytest.mark.parametrize("status", [Action.Status.STOPPED, Action.Status.FAILED])
def test_a_narration_cut_short_under_review_is_held_too(client, campaign, carol, play, model, status):
    """Stop, a failure or a worker given up leaves the text written so far:
    players must not read it unreviewed either, by page, export or stream."""
    model.script({"reply": NARRATION})
    _, narration = play("I climb the lighthouse stairs.")
    Action.objects.filter(pk=narration.pk).update(held_for_review=False, status=Action.Status.STREAMING)
    if status == Action.Status.STOPPED:
        assert services.narration_stop(action=narration, now=timezone.now())
    else:
        Action.objects.filter(pk=narration.pk).update(heartbeat=None)
        assert narrating.operator_fail(narration.pk)
    narration.refresh_from_db()
    assert narration.held_for_review
    client.force_login(carol)
    for text in (_page(client, campaign), _stream(client, campaign, narration),
                 client.get(reverse("story_export_markdown", args=[campaign.pk])).content.decode()):
        assert "lighthouse keeper" not in text


def test_a_narration_being_written_under_review_is_not_in_a_players_export(client, campaign, carol, play, model):
    model.script({"reply": NARRATION})
    _, narration = play("I climb the lighthouse stairs.")
    Action.objects.filter(pk=narration.pk).update(held_for_review=False, status=Action.Status.STREAMING)
    client.force_login(carol)
    for export in ("story_export_markdown", "story_export_html"):
        assert "lighthouse keeper" not in client.get(reverse(export, args=[campaign.pk])).content.decode()
