"""What a model server says of a failure stays with staff (issue 23, finding
10): a reader's page names the kind of failure; a staff user's page and the
admin also show the server's own message, which may name internal addresses
or echo a key; the log keeps it for operators."""

import logging

import pytest
from django.urls import reverse
from django.utils import timezone

from storyapp import services
from storyapp.models import Action

SECRET = "upstream 10.9.8.7:8000 rejected key sk-live-4f9a2b7c: invalid grammar"


@pytest.fixture
def failed(campaign, model, django_capture_on_commit_callbacks):
    model.script({"status": 400, "message": SECRET})
    with django_capture_on_commit_callbacks(execute=True):
        _, narration = services.turn_submit(campaign=campaign, text="I light the lantern.", now=timezone.now())
    narration.refresh_from_db()
    return narration


def play_page(client, user, campaign) -> str:
    client.force_login(user)
    return client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()


def test_a_reader_sees_the_kind_of_failure_and_nothing_the_server_said(client, alice, campaign, failed):
    assert failed.status == Action.Status.FAILED
    assert "rejected the request (400)" in failed.error and "sk-live" not in failed.error
    page = play_page(client, alice, campaign)
    assert "rejected the request (400)" in page
    assert "sk-live" not in page and "10.9.8.7" not in page and "invalid grammar" not in page


def test_a_staff_user_also_sees_what_the_server_said(client, alice, campaign, failed):
    alice.is_staff = True
    alice.save()
    page = play_page(client, alice, campaign)
    assert "rejected the request (400)" in page
    assert f"For staff, the server said: <code>HTTP 400: {SECRET}</code>" in page


def test_the_admin_shows_what_the_server_said(admin_client, failed):
    page = admin_client.get(reverse("admin:storyapp_action_change", args=[failed.pk])).content.decode()
    assert "sk-live-4f9a2b7c" in page


def test_the_log_keeps_what_the_server_said(campaign, model, django_capture_on_commit_callbacks, caplog):
    model.script({"status": 400, "message": SECRET})
    with caplog.at_level(logging.WARNING, logger="storyapp.narration"):
        with django_capture_on_commit_callbacks(execute=True):
            services.turn_submit(campaign=campaign, text="I light the lantern.", now=timezone.now())
    assert SECRET in caplog.text


def test_a_retried_narration_forgets_the_old_detail(campaign, model, failed, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.turn_retry(campaign=campaign, now=timezone.now())
    failed.refresh_from_db()
    assert failed.status == Action.Status.DONE and failed.error == "" and failed.error_detail == ""
