"""/healthz says the process is up; /readyz says whether it can serve readers,
with the reasons for staff only, and quickly even when a server is gone."""

import socket
import time
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from ops import health
from ops.models import WorkerHeartbeat
from storyapp.celery import app
from tests.factories import UserFactory


@pytest.fixture
def silent_port():
    """A port that takes connections and never says a word (a server hung, or
    behind a dropped route): only a client's own timeout ends the wait."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@pytest.fixture
def silent_broker(monkeypatch, silent_port):
    monkeypatch.setattr(app.conf, "broker_url", f"redis://127.0.0.1:{silent_port}/0")


def test_healthz_answers_without_a_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_needs_a_live_worker_on_each_queue(client, db):
    client.force_login(UserFactory(is_staff=True))
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503 and body["status"] == "not ready"
    assert body["checks"]["database"]["ok"] and body["checks"]["migrations"]["ok"]
    assert "celery, narration" in body["checks"]["workers"]["detail"]
    WorkerHeartbeat.objects.create(name="celery@a", seen=timezone.now(), queues="celery")
    WorkerHeartbeat.objects.create(name="narrator@a", seen=timezone.now() - timedelta(minutes=5), queues="narration")
    assert "narration" in client.get("/readyz").json()["checks"]["workers"]["detail"], "a dead one does not count"
    WorkerHeartbeat.objects.filter(name="narrator@a").update(seen=timezone.now())
    body = client.get("/readyz").json()
    assert body["checks"]["workers"]["ok"] and body["checks"]["broker"]["ok"]
    assert client.get("/readyz").status_code == 200


def test_anyone_sees_which_checks_fail_and_only_staff_see_why(client, db, silent_broker):
    body = client.get("/readyz").json()
    assert body == {"status": "not ready", "ok": ["database", "migrations"], "failing": ["workers", "broker"]}
    client.force_login(UserFactory())
    assert "checks" not in client.get("/readyz").json(), "a reader is no operator"
    client.force_login(UserFactory(is_staff=True))
    checks = client.get("/readyz").json()["checks"]
    assert checks["broker"]["ok"] is False and "Timeout" in checks["broker"]["detail"]


def test_a_broker_that_does_not_answer_costs_about_a_second(db, silent_broker):
    started = time.monotonic()
    check = health.broker()
    assert not check.ok and time.monotonic() - started < health.BROKER_TIMEOUT + 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has no server to wait for")
def test_a_database_that_does_not_answer_costs_about_two_seconds(db, silent_port, monkeypatch):
    monkeypatch.setitem(connections["default"].settings_dict, "HOST", "127.0.0.1")
    monkeypatch.setitem(connections["default"].settings_dict, "PORT", str(silent_port))
    started = time.monotonic()
    check = health.database()
    assert not check.ok and time.monotonic() - started < health.DATABASE_TIMEOUT + 1.5
