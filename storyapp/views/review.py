"""The game master's review of narrations and whispers to one seat."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from ..access import action_for, campaign_for, place_for, place_in
from ..forms import WhisperForm
from ..review import narration_approve, whisper_to_seat
from .play import story_response
from .playpage import player_seats, whispers_panel


@login_required
@require_POST
def narration_approve_view(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    """Lets the players read a held narration (as it stands, edits included)."""
    action = action_for(request, pk, action_id)
    narration_approve(action=action, now=timezone.now())
    return story_response(request, action.campaign)


@login_required
@require_POST
def whisper_send(request: HttpRequest, pk: int) -> HttpResponse:
    """A note from the game master to one seat, read by its player alone."""
    campaign = campaign_for(request, pk)
    place = place_in(campaign, request.user)
    form = WhisperForm(request.POST, seats=player_seats(campaign))
    status = 400
    if form.is_valid():
        whisper_to_seat(campaign=campaign, seat_name=form.cleaned_data["seat_name"],
                        text=form.cleaned_data["text"].strip())
        form, status = None, 200
    elif not request.htmx:
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
    if not request.htmx:
        return redirect("campaign_play", pk=pk)
    context = {"campaign": campaign, "place": place, **whispers_panel(campaign, place, form)}
    return render(request, "storyapp/play.html#whispers", context, status=status)


@login_required
@require_GET
def whispers_panel_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The whispers panel alone, as this member may read it: what a live
    page fetches when a whisper was sent to its seat."""
    place = place_for(request, pk)
    context = {"campaign": place.campaign, "place": place, **whispers_panel(place.campaign, place)}
    return render(request, "storyapp/play.html#whispers", context)
