"""Password hashes take turns (issue 23, finding 8): a burst of log-ins
waits for a few hash threads, at a lower priority than the readers' pages,
instead of taking every core from the readers who are playing, and none is
refused for it."""

import os
import sys
import threading
import time

import pytest
from django.contrib.auth import hashers

from storyapp import passwords
from tests.factories import UserFactory


class RetiredHasher(hashers.MD5PasswordHasher):
    """A hasher the instance no longer prefers: its hashes are upgraded."""

    algorithm = "retired"


@pytest.fixture
def threads(settings, monkeypatch):
    settings.LOREMASTER_PASSWORD_HASHES_AT_ONCE = 2
    monkeypatch.setattr(passwords, "_pool", None)
    yield
    if passwords._pool is not None:
        passwords._pool.shutdown()


def test_no_more_hashes_run_at_once_than_the_threads_and_all_of_them_run(threads, monkeypatch):
    running, most = 0, 0
    lock = threading.Lock()

    def slow_check(raw, encoded):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return raw == "right"

    monkeypatch.setattr(passwords.hashers, "check_password", slow_check)
    user = type("User", (), {"password": hashers.make_password("right")})()
    results = []
    monkeypatch.setattr(passwords, "release_connection", lambda: None)
    workers = [threading.Thread(target=lambda: results.append(passwords.check(user, "right"))) for _ in range(12)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert most == 2
    assert results == [True] * 12


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have priorities of their own on Linux")
def test_the_hash_threads_run_at_a_lower_priority_than_the_request(threads):
    def niceness():
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert passwords.hash_threads().submit(niceness).result() == niceness() + passwords.HASH_NICENESS


@pytest.mark.django_db
def test_a_right_password_checks_and_an_old_hash_is_upgraded_by_the_request(threads, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", f"{__name__}.RetiredHasher"]
    user = UserFactory()
    user.password = hashers.make_password("s3cret-harbour", hasher="retired")
    user.save()
    assert not passwords.check(user, "wrong")
    assert passwords.check(user, "s3cret-harbour")
    user.refresh_from_db()
    assert user.password.startswith("md5$") and user.check_password("s3cret-harbour")
