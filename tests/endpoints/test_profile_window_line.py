"""The profile page after a save (issue 24): the probe the save queued runs
in a worker, so the page says "Checking…" and asks again until the server's
answer is stored, never "Not asked yet" about a server being asked."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from endpoints.models import EndpointProfile
from endpoints.probeline import CHECKING, NOT_ASKED, PROBE_EXPECTED_WITHIN, window_line
from endpoints.tasks import probe_endpoint
from tests.factories import EndpointProfileFactory, UserFactory

NOW = timezone.now()


@pytest.mark.parametrize(
    ("fields", "text", "checking"),
    [
        ({"pk": None, "updated": None}, NOT_ASKED, False),
        ({"pk": 1, "updated": NOW - timedelta(seconds=2)}, CHECKING, True),
        ({"pk": 1, "updated": NOW - PROBE_EXPECTED_WITHIN}, NOT_ASKED, False),
        ({"pk": 1, "updated": NOW, "probed_at": NOW, "probed_window_tokens": 4096,
          "probed_window_source": "llama.cpp /props", "probed_window_detail": "n_ctx 4,096 per slot"},
         "4,096 tokens, from llama.cpp /props (n_ctx 4,096 per slot)", False),
        ({"pk": 1, "updated": NOW, "probed_at": NOW, "probed_window_source": "unknown",
          "probed_window_detail": "the server does not say what it accepts (not verified)"},
         "Not verified: the server does not say what it accepts (not verified)", False),
    ],
)
def test_the_line_says_what_is_known_or_that_it_is_being_asked(fields, text, checking):
    line = window_line(EndpointProfile(**fields), now=NOW)
    assert (line.text, line.checking) == (text, checking)


def saved_in_the_admin(admin_client, profile):
    """Saves the profile through its change form; the probe it queues waits
    for a worker (on_commit never runs inside the test's transaction)."""
    change = reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])
    form = admin_client.get(change).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data.update(api_key="", is_default="", is_scripted_demo="", _continue="1")
    response = admin_client.post(change, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    return change


def test_after_a_save_the_page_says_checking_and_the_line_resolves_when_the_probe_answers(admin_client, model):
    model.n_ctx = 4096
    profile = EndpointProfileFactory(base_url=model.base_url, probed_at=timezone.now(), probed_window_tokens=2048,
                                     probed_window_source="llama.cpp /props")
    change = saved_in_the_admin(admin_client, profile)
    poll = reverse("admin:endpoints_endpointprofile_window", args=[profile.pk])
    page = admin_client.get(change).content.decode()
    assert f'<span role="status" data-window-poll="{poll}">{CHECKING}</span>' in page
    assert "Not asked yet" not in page
    assert "endpoints/window_line.js" in page
    assert admin_client.get(poll).json() == {"text": CHECKING, "checking": True}

    probe_endpoint(profile.pk)  # the worker takes the probe the save queued

    answer = admin_client.get(poll).json()
    assert answer["checking"] is False and answer["text"].startswith("4,096 tokens, from llama.cpp /props")
    page = admin_client.get(change).content.decode()
    assert "data-window-poll" not in page and "4,096 tokens, from llama.cpp /props" in page


def test_the_line_is_for_staff_who_may_view_profiles_and_only_read(client, admin_client, db):
    profile = EndpointProfileFactory()
    poll = reverse("admin:endpoints_endpointprofile_window", args=[profile.pk])
    client.force_login(UserFactory(username="carol"))
    response = client.get(poll)
    assert response.status_code == 302 and "/login/" in response["Location"]
    client.force_login(UserFactory(username="dave", is_staff=True))
    assert client.get(poll).status_code == 403
    assert admin_client.post(poll).status_code == 405
