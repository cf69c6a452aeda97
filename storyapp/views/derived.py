"""The reader's way to re-run a summary or memory job that gave up."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from .. import derivedjobs
from ..access import campaign_for, place_in
from ..models import DerivedJob
from .playpage import story_context


@login_required
@require_POST
def derived_retry(request: HttpRequest, pk: int, job_id: int) -> HttpResponse:
    """"Try again now" on the play page's notice: the failed job is queued
    again for a worker, and the story is shown without the notice. Another
    reader's job answers 404, as a missing one does."""
    campaign = campaign_for(request, pk)
    job = get_object_or_404(DerivedJob, pk=job_id, campaign=campaign)
    derivedjobs.retry_now(job)
    if not request.htmx:
        return redirect("campaign_play", pk=campaign.pk)
    return render(request, "storyapp/play.html#story", story_context(campaign, place_in(campaign, request.user)))
