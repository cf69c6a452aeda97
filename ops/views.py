"""The operators' Jobs page with its Requeue, Fail, Retry and Cancel, and the
health probes a load balancer asks.

The Jobs page is staff only: a reader who is not staff gets the same 404 as
for a page that does not exist, whatever the method; a visitor who is not
signed in is sent to log in.
"""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from knowledge import services
from knowledge.models import IndexJob
from lifecycle import policy
from storyapp import narration

from . import health, selectors


def staff_required(view):
    """Staff only; everyone else is told the page does not exist."""

    @wraps(view)
    @login_required
    def wrapped(request, *args, **kwargs):
        if not request.user.is_staff:
            raise Http404("No such page.")
        return view(request, *args, **kwargs)

    return wrapped


@staff_required
@require_GET
def job_monitor(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in IndexJob.State.values:
        state = ""
    context = {
        "jobs": selectors.monitor_jobs(state=state),
        "health": selectors.monitor_health(now=timezone.now()),
        "state": state,
        "states": IndexJob.State.choices,
        "stale_after": policy.STALE_AFTER,
        "narrations": selectors.monitor_narrations(),
        "derived_jobs": selectors.monitor_derived(),
        "readiness": health.readiness(now=timezone.now()),
    }
    template = "ops/job_monitor.html"
    if request.htmx:
        template += "#jobs"
    return render(request, template, context)


def _back_to_monitor(request: HttpRequest) -> HttpResponse:
    state = request.POST.get("state", "")
    response = redirect("job_monitor")
    if state in IndexJob.State.values:
        response["Location"] += f"?state={state}"
    return response


@staff_required
@require_POST
def job_retry(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(IndexJob, pk=job_id)
    new = services.job_retry(job=job)
    messages.success(request, f"Queued job #{new.pk} for “{job.source.title}”.")
    return _back_to_monitor(request)


@staff_required
@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(IndexJob, pk=job_id)
    if services.job_cancel(job=job, now=timezone.now()):
        messages.success(request, f"Cancelled job #{job.pk}.")
    else:
        messages.error(request, f"Job #{job.pk} had already finished.")
    return _back_to_monitor(request)


@staff_required
@require_POST
def narration_requeue(request: HttpRequest, action_id: int) -> HttpResponse:
    if narration.operator_requeue(action_id, now=timezone.now()):
        messages.success(request, f"Sent narration #{action_id} to a worker again.")
    else:
        messages.error(request, f"Narration #{action_id} had already finished.")
    return _back_to_monitor(request)


@staff_required
@require_POST
def narration_fail(request: HttpRequest, action_id: int) -> HttpResponse:
    if narration.operator_fail(action_id):
        messages.success(request, f"Ended narration #{action_id} as failed; its reader can retry.")
    else:
        messages.error(request, f"Narration #{action_id} had already finished.")
    return _back_to_monitor(request)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and answering; nothing else is asked."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Database, migrations, broker and a live worker on each queue, as JSON;
    503 when any fails, so a load balancer stops sending readers here. The
    names of the checks for anyone; what each found for staff only."""
    checks = health.readiness(now=timezone.now())
    ready = all(check.ok for check in checks)
    body = {"status": "ready" if ready else "not ready", **health.public(checks)}
    if _is_staff(request, database_up=checks[0].ok):
        body["checks"] = {c.name: c.as_record() for c in checks}
    return JsonResponse(body, status=200 if ready else 503)


def _is_staff(request: HttpRequest, *, database_up: bool) -> bool:
    """Whether the caller is staff, asked only when the database answers:
    with it down, loading a signed-in user would wait out the pool, and
    nobody can be told apart from a visitor."""
    if not database_up:
        return False
    try:
        return request.user.is_staff
    except Exception:  # noqa: BLE001 - a session store that is down makes a visitor, not a 500
        return False
