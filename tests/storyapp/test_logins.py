"""The one log-in throttle (issue 23, findings 4 and 10): the reader's
log-in, the admin's and the password change count together, keyed on the
username and the address the trusted proxy gives, in the database."""

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from django.urls import reverse

from storyapp.addresses import forwarded_address
from storyapp.logins import LOCKOUT, LOGIN_LOCKED_MESSAGE, WINDOW, Count, after_failure
from tests.factories import PASSWORD, UserFactory

NOW = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("count", "now", "expected"), [
    (None, NOW, Count(1, NOW)),
    (Count(3, NOW), NOW + timedelta(minutes=1), Count(4, NOW)),
    (Count(4, NOW), NOW + timedelta(minutes=1), Count(0, NOW + timedelta(minutes=1),
                                                     NOW + timedelta(minutes=1) + LOCKOUT)),
    (Count(4, NOW), NOW + WINDOW + timedelta(seconds=1), Count(1, NOW + WINDOW + timedelta(seconds=1))),
])
def test_a_failure_counts_within_its_window_and_the_last_allowed_locks(count, now, expected):
    assert after_failure(count, now=now, allowed=5) == expected


@pytest.mark.parametrize(("header", "hops", "expected"), [
    ("", 1, ""),
    ("203.0.113.9", 1, "203.0.113.9"),
    ("6.6.6.6, 203.0.113.9", 1, "203.0.113.9"),
    ("6.6.6.6, 203.0.113.9, 10.0.0.2", 2, "203.0.113.9"),
    ("203.0.113.9", 2, "203.0.113.9"),
])
def test_only_the_hops_our_proxies_add_are_read(header, hops, expected):
    assert forwarded_address(header, hops=hops) == expected


def _log_in(client, password, username="alice", url="login", **extra):
    return client.post(reverse(url), {"username": username, "password": password}, **extra)


def _fail(client, times, username="alice", url="login", **extra):
    for _ in range(times):
        assert _log_in(client, "wrong", username, url, **extra).status_code == 200


@pytest.mark.django_db
def test_repeated_wrong_passwords_lock_the_login_out_even_for_the_right_one(client, alice, settings):
    _fail(client, settings.LOREMASTER_LOGIN_FAILURES)
    response = _log_in(client, PASSWORD)
    assert response.status_code == 200
    assert LOGIN_LOCKED_MESSAGE in response.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_a_lockout_is_for_that_username_and_address_only(client, alice, bob, settings):
    _fail(client, settings.LOREMASTER_LOGIN_FAILURES)
    assert _log_in(client, PASSWORD, username="bob").status_code == 302
    other = client.__class__(REMOTE_ADDR="192.0.2.7")
    assert _log_in(other, PASSWORD).status_code == 302


@pytest.mark.django_db
def test_a_good_log_in_clears_the_earlier_failures(client, alice, settings):
    for _ in range(2):
        _fail(client, settings.LOREMASTER_LOGIN_FAILURES - 1)
        assert _log_in(client, PASSWORD).status_code == 302
        client.logout()


@pytest.mark.django_db
def test_the_admin_login_is_locked_after_the_same_failures(client, settings):
    UserFactory(username="root", is_staff=True, is_superuser=True)
    _fail(client, settings.LOREMASTER_LOGIN_FAILURES, username="root", url="admin:login")
    response = _log_in(client, PASSWORD, username="root", url="admin:login")
    assert response.status_code == 200 and LOGIN_LOCKED_MESSAGE in response.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_the_reader_and_admin_logins_count_together(client, alice, settings):
    _fail(client, settings.LOREMASTER_LOGIN_FAILURES - 1, url="admin:login")
    _fail(client, 1)
    assert LOGIN_LOCKED_MESSAGE in _log_in(client, PASSWORD).content.decode()


@pytest.mark.django_db
def test_thirty_five_forwarded_addresses_do_not_escape_the_lock(client, alice, settings):
    """Without BEHIND_PROXY, X-Forwarded-For is the client's own claim."""
    for n in range(35):
        _log_in(client, "wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    response = _log_in(client, PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.200")
    assert LOGIN_LOCKED_MESSAGE in response.content.decode()


@pytest.mark.django_db
def test_behind_a_proxy_only_the_hop_it_adds_counts(client, alice, settings):
    settings.BEHIND_PROXY = True
    for n in range(35):
        _log_in(client, "wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}, 203.0.113.9")
    locked = _log_in(client, PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.200, 203.0.113.9")
    assert LOGIN_LOCKED_MESSAGE in locked.content.decode()
    elsewhere = _log_in(client, PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.10")
    assert elsewhere.status_code == 302


@pytest.mark.django_db
def test_many_addresses_together_lock_the_username(client, alice, settings):
    settings.LOREMASTER_LOGIN_FAILURES_PER_USERNAME = 8
    for n in range(8):
        _log_in(client.__class__(REMOTE_ADDR=f"192.0.2.{n}"), "wrong")
    fresh = client.__class__(REMOTE_ADDR="192.0.2.99")
    assert LOGIN_LOCKED_MESSAGE in _log_in(fresh, PASSWORD).content.decode()


@pytest.mark.django_db
def test_a_reader_changes_their_password_from_the_page_header(client, alice):
    client.force_login(alice)
    assert reverse("password_change") in client.get(reverse("campaign_list")).content.decode()
    new = "a different horse entirely"
    response = client.post(reverse("password_change"),
                           {"old_password": PASSWORD, "new_password1": new, "new_password2": new})
    assert response.status_code == 302 and response["Location"] == reverse("password_change_done")
    alice.refresh_from_db()
    assert alice.check_password(new)
    assert client.get(reverse("campaign_list")).status_code == 200, "the session survives the change"


@pytest.mark.django_db
def test_wrong_old_passwords_are_throttled_like_a_log_in(client, alice, settings):
    client.force_login(alice)
    new = "a different horse entirely"
    for _ in range(settings.LOREMASTER_LOGIN_FAILURES):
        client.post(reverse("password_change"), {"old_password": "wrong", "new_password1": new, "new_password2": new})
    response = client.post(reverse("password_change"),
                           {"old_password": PASSWORD, "new_password1": new, "new_password2": new})
    assert LOGIN_LOCKED_MESSAGE in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


@pytest.mark.django_db
def test_the_admins_password_change_is_the_throttled_one(client):
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    response = client.get("/admin/password_change/")
    assert response.status_code == 302 and response["Location"] == reverse("password_change")


def test_uvicorn_never_rewrites_the_client_address_from_a_header():
    """Uvicorn trusts X-Forwarded-For from loopback by default: the throttle
    must see the socket's address, and read the header itself (storyapp.addresses)."""
    from storyapp.demo import procfile

    web = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:"))
    demo = next(line for line in procfile(web_port=8000, demo_port=None, python="python").splitlines()
                if line.startswith("web:"))
    for line in (web, demo):
        assert "--no-proxy-headers" in line and " --proxy-headers" not in line
