"""Liveness and readiness for load balancers and operators."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from .. import health


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and answering; nothing else is asked."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Database, migrations, broker and a live worker on each queue, as JSON;
    503 when any fails, so a load balancer stops sending readers here."""
    checks = health.readiness(now=timezone.now())
    ready = all(check.ok for check in checks)
    body = {"status": "ready" if ready else "not ready", "checks": {c.name: c.as_record() for c in checks}}
    return JsonResponse(body, status=200 if ready else 503)
