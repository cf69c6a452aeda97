"""/healthz says the process is up; /readyz says whether it can serve readers."""

from datetime import timedelta

from django.utils import timezone

from ops.models import WorkerHeartbeat


def test_healthz_answers_without_a_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_needs_a_live_worker_on_each_queue(client, db):
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
