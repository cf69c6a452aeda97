"""The admin's Test connection (issue 23, finding 10): a GET only shows the
page, the test itself is a CSRF-checked POST; a stored profile the allowlist
now refuses is shown as refused, never a 500, and a turn on it fails with a
clear message."""

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from endpoints.models import EndpointProfile
from storyapp import services
from storyapp.models import Action
from tests.factories import CampaignFactory, EndpointProfileFactory


def url_of(profile):
    return reverse("admin:endpoints_endpointprofile_test", args=[profile.pk])


def test_a_get_shows_the_button_and_asks_the_server_nothing(admin_client, model):
    profile = EndpointProfileFactory(base_url=model.base_url, probed_at=timezone.now(), probed_window_tokens=4096)
    page = admin_client.get(url_of(profile)).content.decode()
    assert 'method="post"' in page and "csrfmiddlewaretoken" in page and ">Test connection</button>" in page
    assert model.requests() == []
    profile.refresh_from_db()
    assert profile.probed_window_tokens == 4096 and profile.probed_at is not None


def test_the_post_needs_the_csrf_token(admin_user, model):
    profile = EndpointProfileFactory(base_url=model.base_url)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin_user)
    assert browser.post(url_of(profile)).status_code == 403
    assert model.requests() == []


def test_the_profile_page_posts_to_the_test_from_its_own_form(admin_client, model):
    profile = EndpointProfileFactory(base_url=model.base_url)
    page = admin_client.get(reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])).content.decode()
    assert f'formaction="{url_of(profile)}" formmethod="post"' in page
    assert f'href="{url_of(profile)}"' not in page


def test_a_profile_the_allowlist_now_refuses_is_shown_refused_not_a_500(admin_client, db, settings):
    profile = EndpointProfileFactory(base_url="http://10.0.0.5:8080/v1")
    settings.ENDPOINT_ALLOWLIST = ["*.example.test"]
    response = admin_client.post(url_of(profile))
    assert response.status_code == 200
    page = response.content.decode()
    assert "<strong>Refused.</strong> The profile's address is not allowed" in page
    assert "The host 10.0.0.5 is not on this server&#x27;s endpoint allowlist" in page
    profile.refresh_from_db()
    assert profile.probed_at is None  # asked again before the next turn


def test_a_turn_on_a_refused_profile_fails_with_a_clear_message(alice, settings, django_capture_on_commit_callbacks):
    profile = EndpointProfileFactory(base_url="http://10.0.0.5:8080/v1", name="Basement GPU")
    settings.ENDPOINT_ALLOWLIST = ["*.example.test"]
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    with django_capture_on_commit_callbacks(execute=True):
        _, narration = services.turn_submit(campaign=campaign, text="I walk to the quay.", now=timezone.now())
    narration.refresh_from_db()
    assert narration.status == Action.Status.FAILED
    assert narration.error.startswith(
        "The address of the model endpoint “Basement GPU” is not on this server's endpoint allowlist"
    )
    assert "10.0.0.5" not in narration.error
    assert EndpointProfile.objects.get(pk=profile.pk).probed_window_source in ("", "refused")


@pytest.mark.parametrize("method", ["put", "delete"])
def test_other_methods_are_not_allowed(admin_client, db, method):
    profile = EndpointProfileFactory()
    assert getattr(admin_client, method)(url_of(profile)).status_code == 405
