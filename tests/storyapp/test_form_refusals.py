"""A refused form on the play page answers 4xx (base.html's rule swaps those
in) with the form again, its message marked for the page to bring into view,
and the reader's input kept; the turn box cuts nothing and counts instead."""

import re

import pytest
from django.urls import reverse

from storyapp.forms import CampaignForm
from storyapp.models import Action, Campaign
from tests.factories import story

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def reader(client, alice):
    client.force_login(alice)
    return client


def test_a_turn_over_the_limit_is_a_400_with_the_limit_in_a_marked_refusal(reader, campaign):
    response = reader.post(reverse("turn_submit", args=[campaign.pk]), {"text": "x" * 4001}, **HX)
    assert response.status_code == 400
    body = response.content.decode()
    assert re.search(r'class="error refusal" role="alert">Ensure this value has at most 4000 characters', body)
    assert not Action.objects.filter(campaign=campaign).exists()


def test_without_javascript_the_refused_turn_comes_back_whole_in_the_box(reader, campaign):
    response = reader.post(reverse("turn_submit", args=[campaign.pk]), {"text": "y" * 4001})
    assert response.status_code == 400
    assert ">" + "y" * 4001 + "</textarea>" in response.content.decode()


def test_a_command_refused_in_the_story_as_it_is_is_a_409(reader, campaign):
    response = reader.post(reverse("turn_undo", args=[campaign.pk]), **HX)
    assert response.status_code == 409
    assert 'class="error refusal" role="alert"' in response.content.decode()


def test_the_turn_box_has_no_maxlength_and_tells_the_page_its_limit(reader, campaign):
    body = reader.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    [box] = re.findall(r"<textarea id=\"turn-text\"[^>]*>", body)
    assert "maxlength" not in box and 'data-limit="4000"' in box and 'aria-describedby="turn-count"' in box


def test_an_empty_edit_of_an_action_is_a_400_with_the_form(reader, campaign, play):
    player, _ = play("I open the door.")
    response = reader.post(reverse("action_edit", args=[campaign.pk, player.pk]), {"text": ""}, **HX)
    assert response.status_code == 400
    body = response.content.decode()
    assert 'class="errorlist' in body and f'id="action-{player.pk}"' in body



def test_saving_the_settings_keeps_a_head_that_moved_while_they_were_open(campaign):
    """A shared story's players play on while the game master edits its
    settings: the save writes what the form edits, never the head it read."""
    story(campaign, "I walk to the quay.", "Gulls wheel.")
    campaign.refresh_from_db()
    open_copy = Campaign.objects.get(pk=campaign.pk)
    newer = story(campaign, "I board the ship.", "The sails fill.")[-1]
    Campaign.objects.filter(pk=campaign.pk).update(head=newer)
    form = CampaignForm({"title": "Renamed", "narration_length": ""}, instance=open_copy)
    assert form.is_valid(), form.errors
    form.save()
    campaign.refresh_from_db()
    assert (campaign.title, campaign.head_id) == ("Renamed", newer.pk)
