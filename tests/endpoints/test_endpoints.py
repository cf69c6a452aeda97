"""Endpoint profiles: the SSRF allowlist and API keys that never leave the server."""

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from demomodel import DemoModelServer
from endpoints.allowlist import validate_base_url
from endpoints.client import client_for
from endpoints.forms import EndpointProfileForm
from endpoints.models import EndpointProfile
from storyapp import services
from tests.factories import CampaignFactory, EndpointProfileFactory, UserFactory

SECRET = "sk-test-this-must-never-show-up-anywhere"


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:11434/v1", "http://localhost:8080/v1", "https://api.openai.com/v1", "http://[::1]:8000/v1"],
)
def test_allowed_hosts_pass(url):
    validate_base_url(url)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data", "allowlist"),
        ("http://10.0.0.5:8000/v1", "allowlist"),
        ("http://api.openai.com.evil.example/v1", "allowlist"),
        ("file:///etc/passwd", "http://"),
        ("http://user:pass@127.0.0.1/v1", "own field"),
    ],
)
def test_other_urls_are_refused(url, reason):
    with pytest.raises(ValidationError, match=reason):
        validate_base_url(url)


def test_the_allowlist_is_a_setting(settings):
    settings.ENDPOINT_ALLOWLIST = ["*.internal.example", "127.0.0.1:8080"]
    validate_base_url("https://llm.internal.example/v1")
    validate_base_url("http://127.0.0.1:8080/v1")
    with pytest.raises(ValidationError):
        validate_base_url("http://127.0.0.1:11434/v1")


def test_a_disallowed_url_is_a_form_error(db):
    form = EndpointProfileForm(data={
        "name": "Metadata", "base_url": "http://169.254.169.254/", "chat_model": "x", "api_mode": "chat",
        "temperature": 0.8, "max_output_tokens": 100, "context_token_budget": 1000, "first_byte_timeout_seconds": 10, "timeout_seconds": 10,
        "thinking": "allow", "reasoning_reserve_tokens": 0,
    })
    assert not form.is_valid() and "allowlist" in str(form.errors["base_url"])


def test_the_api_key_is_encrypted_at_rest(db):
    profile = EndpointProfileFactory()
    profile.api_key = SECRET
    profile.save()
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key_encrypted FROM storyapp_endpointprofile WHERE id = %s", [profile.pk])
        (stored,) = cursor.fetchone()
    assert SECRET not in stored
    assert EndpointProfile.objects.get(pk=profile.pk).api_key == SECRET


def test_the_api_key_is_never_rendered_back_in_the_admin(client, db):
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    profile = EndpointProfileFactory()
    profile.api_key = SECRET
    profile.save()
    client.force_login(admin)
    page = client.get(reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])).content.decode()
    assert SECRET not in page and profile.api_key_encrypted not in page


def test_saving_the_admin_form_without_a_key_keeps_the_stored_one(db):
    profile = EndpointProfileFactory()
    profile.api_key = SECRET
    profile.save()
    data = {
        "name": profile.name, "base_url": profile.base_url, "chat_model": "other", "api_mode": "chat",
        "temperature": 0.5, "max_output_tokens": 100, "context_token_budget": 1000, "first_byte_timeout_seconds": 10, "timeout_seconds": 10,
        "thinking": "allow", "reasoning_reserve_tokens": 0,
        "api_key": "",
    }
    form = EndpointProfileForm(data=data, instance=profile)
    assert form.is_valid(), form.errors
    form.save()
    assert EndpointProfile.objects.get(pk=profile.pk).api_key == SECRET


def test_the_key_is_sent_to_the_endpoint_as_a_bearer_token(alice, django_capture_on_commit_callbacks):
    with DemoModelServer(api_key=SECRET, chunk_delay=0) as guarded:
        profile = EndpointProfileFactory(base_url=guarded.base_url)
        profile.api_key = SECRET
        profile.save()
        campaign = CampaignFactory(owner=alice, endpoint=profile)
        with django_capture_on_commit_callbacks(execute=True):
            _, narration = services.turn_submit(campaign=campaign, text="Hello.", now=timezone.now())
        narration.refresh_from_db()
        assert narration.status == "done", narration.error


def test_one_client_per_profile_is_kept_and_replaced_when_the_profile_changes(db, model):
    profile = EndpointProfileFactory(base_url=model.base_url)
    first, again = client_for(profile), client_for(profile, timeout=3)
    assert first._client is again._client, "the connection pool is shared between calls"
    assert again.timeout.read == 3 and first.timeout.read == profile.first_byte_timeout_seconds
    profile.api_key = "a-new-key"
    profile.save()
    replaced = client_for(profile)
    assert replaced._client is not first._client and first._client.is_closed
