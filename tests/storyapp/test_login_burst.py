"""A burst of log-ins on a small pool (issue 23, finding 8): the request
held its pooled connection through the password hash, so 20 log-ins on the
Procfile's pool answered 500 and the readers already playing waited. Now
the connection goes back to the pool while the password hashes, and the
hashes take turns."""

import threading
import time

import httpx
import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection

from tests import live
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

LOGINS = 10


def _log_in(base: str, barrier: threading.Barrier, results: list) -> None:
    with httpx.Client(base_url=base, timeout=60) as client:
        client.get("/accounts/login/")
        barrier.wait()
        response = client.post("/accounts/login/", data={"username": "carol", "password": PASSWORD},
                               headers={"X-CSRFToken": client.cookies["csrftoken"]})
        results.append(response.status_code)


@pytest.fixture
def stack():
    """The web server on a pool of two, waiting at most a second for a connection."""
    if connection.vendor != "postgresql":
        pytest.skip("the connection pool is PostgreSQL's")
    env = {"LOREMASTER_DB_POOL_SIZE": "2", "LOREMASTER_DB_POOL_TIMEOUT": "1"}
    with live.web_server(port=8531, env=env) as base:
        yield base


def test_ten_simultaneous_log_ins_on_a_pool_of_two_all_succeed(alice, stack):
    base = stack
    # The server's own hasher at its full cost, as a real log-in pays it.
    carol = UserFactory(username="carol")
    carol.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    carol.save(update_fields=["password"])
    playing = live.logged_in(base, alice)
    barrier, results = threading.Barrier(LOGINS + 1), []
    threads = [threading.Thread(target=_log_in, args=(base, barrier, results)) for _ in range(LOGINS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    time.sleep(0.3)  # the log-ins are hashing
    started = time.monotonic()
    page = playing.get("/campaigns/")
    waited = time.monotonic() - started
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results) == [302] * LOGINS
    assert page.status_code == 200
    assert waited < 1.5, f"a reader's page waited {waited:.2f} s behind the log-ins"
