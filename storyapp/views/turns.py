"""The turn order's commands: the game master chooses the order and its
timer and closes a round; a player passes (storyapp.turnorder)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_POST

from .. import services, turnorder
from ..access import actor_for, campaign_for
from ..forms import TurnOrderForm
from .play import story_response


@login_required
@require_POST
def campaign_turn_order(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    form = TurnOrderForm(request.POST)
    if not form.is_valid():
        errors = " ".join(str(e) for field in form.errors.values() for e in field)
        return story_response(request, campaign, error=errors, status=400)
    turnorder.order_set(campaign=campaign, mode=form.cleaned_data["turn_mode"],
                        seconds=form.cleaned_data["turn_seconds"], now=timezone.now())
    return story_response(request, campaign)


@login_required
@require_POST
def round_close(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    try:
        turnorder.round_close(campaign=campaign, now=timezone.now())
    except services.TurnRefused as exc:
        return story_response(request, campaign, error=str(exc))
    return story_response(request, campaign)


@login_required
@require_POST
def turn_pass(request: HttpRequest, pk: int) -> HttpResponse:
    place = actor_for(request, pk)
    try:
        turnorder.turn_pass(place=place, now=timezone.now())
    except services.TurnRefused as exc:
        return story_response(request, place.campaign, error=str(exc), place=place)
    return story_response(request, place.campaign, place=place)
