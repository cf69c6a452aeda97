"""The story's branches, and jumping to the end of one."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from .. import selectors, services
from ..access import action_for, campaign_for


@login_required
def campaign_branches(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    return render(request, "storyapp/branches.html", {"campaign": campaign, "branches": selectors.branch_ends(campaign)})


@login_required
@require_POST
def branch_jump(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    action = action_for(request, pk, action_id)
    try:
        services.branch_jump(campaign=campaign, action=action, now=timezone.now())
    except services.TurnRefused as exc:
        messages.error(request, str(exc))
        return redirect("campaign_branches", pk=pk)
    return redirect("campaign_play", pk=pk)
