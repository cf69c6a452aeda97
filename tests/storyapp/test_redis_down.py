"""Redis down (issue 23, findings 5 and 9): the cache and the broker gone,
a reader still logs in, reads every page, and sends a turn that is kept
with a clear message; the log-in throttle still locks."""

import pytest
from django.test import override_settings
from django.urls import reverse
from kombu.exceptions import OperationalError

from storyapp import services, tasks
from storyapp.logins import LOGIN_LOCKED_MESSAGE
from storyapp.models import Action
from tests.factories import PASSWORD
from tests.live import free_port


@pytest.fixture
def redis_down(monkeypatch):
    """Cuts Redis: the hosted settings with nothing listening where it should
    be. Undone before the shared fixtures clear the cache."""
    overrides = []

    def cut():
        dead = f"redis://127.0.0.1:{free_port()}/0"
        overrides.append(override_settings(
            CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": dead,
                                "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}},
        ))
        overrides[-1].enable()

        def refuse(*args, **kwargs):
            raise OperationalError(f"Error 111 connecting to {dead}. Connection refused.")

        monkeypatch.setattr(tasks.narrate_action, "delay", refuse)

    yield cut
    for override in overrides:
        override.disable()


def _log_in(client, password):
    return client.post(reverse("login"), {"username": "alice", "password": password})


def test_a_reader_logs_in_and_reads_every_page(client, campaign, play, library, redis_down, settings):
    library(campaign, "# The Quay\nGulls over grey water.")
    _, narration = play("I walk to the quay.")
    redis_down()
    # Hosted or not, sessions are the database's alone (cached_db raised here).
    assert settings.SESSION_ENGINE == "django.contrib.sessions.backends.db"
    assert _log_in(client, PASSWORD).status_code == 302
    pages = [reverse("campaign_list"), reverse("campaign_play", args=[campaign.pk]),
             reverse("context_inspector", args=[campaign.pk, narration.pk]), reverse("library", args=[campaign.pk]),
             reverse("action_stream", args=[campaign.pk, narration.pk])]
    for page in pages:
        assert client.get(page).status_code == 200, page


@pytest.mark.django_db(transaction=True)
def test_a_turn_is_kept_and_says_the_narration_service_is_unavailable(client, campaign, redis_down):
    """Transactional: the narration is sent as the turn commits, as in a
    request, so the page the post answers already says it."""
    redis_down()
    assert _log_in(client, PASSWORD).status_code == 302
    response = client.post(reverse("turn_submit", args=[campaign.pk]), {"text": "I light the lamp."},
                           headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "narration service is unavailable" in response.content.decode()
    narration = Action.objects.get(campaign=campaign, kind=Action.Kind.AI)
    assert narration.status == Action.Status.PENDING and narration.error == services.BROKER_DOWN
    assert narration.parent.text == "I light the lamp."


@pytest.mark.django_db
def test_the_log_in_throttle_still_locks(client, alice, settings, redis_down):
    redis_down()
    for _ in range(settings.LOREMASTER_LOGIN_FAILURES):
        assert _log_in(client, "wrong").status_code == 200
    assert LOGIN_LOCKED_MESSAGE in _log_in(client, PASSWORD).content.decode()
