"""Per-reader limits: over one, a page answers 429 with a message it shows,
stores nothing, and keeps what the reader typed; other readers go on."""

import html
import io
import json

import pytest
from django.urls import reverse

from storyapp.models import Action, Campaign
from tests.factories import CampaignFactory


@pytest.fixture
def rates(settings, one_quota_window):
    settings.LOREMASTER_READER_RATES = {"turns": 1, "uploads": 2}
    return settings.LOREMASTER_READER_RATES


def test_a_reader_over_the_turn_rate_gets_429_and_keeps_the_typed_turn(client, campaign, rates):
    client.force_login(campaign.owner)
    url = reverse("turn_submit", args=[campaign.pk])
    assert client.post(url, {"text": "I knock."}, HTTP_HX_REQUEST="true").status_code == 200
    Action.objects.filter(campaign=campaign, kind=Action.Kind.AI).update(status=Action.Status.DONE, text="Opened.")
    stored = Action.objects.count()
    response = client.post(url, {"text": "I step inside."}, HTTP_HX_REQUEST="true")
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    page = html.unescape(response.content.decode())
    assert "limit of 1 turns in a minute" in page and "nothing you typed is lost" in page
    assert Action.objects.count() == stored


def test_without_javascript_the_whole_page_says_so_with_the_words_in_the_box(client, campaign, rates):
    client.force_login(campaign.owner)
    url = reverse("turn_submit", args=[campaign.pk])
    client.post(url, {"text": "I knock."})
    Action.objects.filter(campaign=campaign, kind=Action.Kind.AI).update(status=Action.Status.DONE, text="Opened.")
    response = client.post(url, {"text": "I step inside."})
    assert response.status_code == 429
    assert "I step inside." in response.content.decode()


def test_retry_spends_the_same_turn_rate(client, campaign, rates):
    client.force_login(campaign.owner)
    client.post(reverse("turn_submit", args=[campaign.pk]), {"text": "I knock."}, HTTP_HX_REQUEST="true")
    Action.objects.filter(campaign=campaign, kind=Action.Kind.AI).update(status=Action.Status.FAILED)
    response = client.post(reverse("turn_retry", args=[campaign.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 429
    assert Action.objects.get(campaign=campaign, kind=Action.Kind.AI).status == Action.Status.FAILED


def test_one_readers_limit_leaves_another_reader_alone(client, campaign, rates, bob, endpoint):
    client.force_login(campaign.owner)
    client.post(reverse("turn_submit", args=[campaign.pk]), {"text": "I knock."}, HTTP_HX_REQUEST="true")
    theirs = CampaignFactory(owner=bob, endpoint=endpoint)
    client.logout()
    client.force_login(bob)
    response = client.post(reverse("turn_submit", args=[theirs.pk]), {"text": "I wave."}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200


def test_a_reader_at_the_campaign_limit_gets_429_and_no_new_campaign(client, campaign, settings):
    settings.LOREMASTER_CAMPAIGNS_PER_READER = 1
    client.force_login(campaign.owner)
    response = client.post(reverse("campaign_create"), {"title": "Another", "narration_length": "medium"})
    assert response.status_code == 429
    assert "You already have 1 campaigns, this instance's limit" in html.unescape(response.content.decode())
    assert Campaign.objects.filter(owner__username="alice").count() == 1


def test_a_bundle_import_at_the_campaign_limit_gets_429_and_imports_nothing(client, campaign, settings):
    settings.LOREMASTER_CAMPAIGNS_PER_READER = 1
    client.force_login(campaign.owner)
    bundle = io.BytesIO(json.dumps({"format": 1, "campaign": {"title": "Imported"}}).encode())
    bundle.name = "story.json"
    response = client.post(reverse("campaign_import"), {"bundle": bundle})
    assert response.status_code == 429
    assert "Nothing was imported" in html.unescape(response.content.decode())
    assert Campaign.objects.filter(owner__username="alice").count() == 1
