"""The play page's side panel: the memory fields and the story state,
read and corrected by the reader."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from .. import review, selectors, services
from ..access import campaign_for, place_for, place_in
from ..forms import MemoryForm, StateForm, TurnForm
from ..models import Campaign
from .playpage import head_of, state_panel, story_context


@login_required
@require_POST
def campaign_memory(request: HttpRequest, pk: int) -> HttpResponse:
    """The side panel's memory fields; saved, they shape the next turn."""
    campaign = campaign_for(request, pk)
    form = MemoryForm(request.POST, instance=campaign)
    saved = form.is_valid()
    if saved:
        form.save()
    if not request.htmx:
        if saved:
            messages.success(request, "Saved. The next turn reads the new notes.")
        return redirect("campaign_play", pk=pk)
    return render(request, "storyapp/play.html#memory", {"campaign": campaign, "memory_form": form, "saved": saved},
                  status=200 if saved else 400)


def _state_saved(campaign: Campaign, form: StateForm) -> bool:
    """Hands the typed state to the service; a refusal becomes the form's
    errors, one per reason, above the reader's text."""
    try:
        services.state_correct(campaign=campaign, document=form.document(), based_on=form.cleaned_data["based_on"])
    except services.StateRefused as exc:
        for problem in exc.problems:
            form.add_error(None, problem)
        return False
    except services.TurnRefused as exc:
        form.add_error(None, str(exc))
        return False
    return True


@login_required
@require_http_methods(["GET", "POST"])
def campaign_state(request: HttpRequest, pk: int) -> HttpResponse:
    """The side panel's story state: GET shows it as it is now (the panel
    asks when it opens and when the story changes); POST saves the reader's
    correction, which the next turn reads. Without JavaScript, a save
    redirects to the page and a refusal shows the whole page again with the
    reader's text kept."""
    if request.method == "GET":
        place = place_for(request, pk)
        campaign = place.campaign
        if not request.htmx:
            return redirect(reverse("campaign_play", args=[pk]) + "#state-panel")
        head = review.state_head(head_of(campaign), game_master=place.is_game_master)
        context = {"campaign": campaign, "place": place, **state_panel(campaign, head)}
        return render(request, "storyapp/play.html#state", context)
    campaign = campaign_for(request, pk)
    form = StateForm(request.POST, state=campaign.state_at(head_of(campaign)), seats=selectors.seat_names(campaign))
    saved = form.is_valid() and _state_saved(campaign, form)
    if saved and not request.htmx:
        messages.success(request, "Story state saved. The next turn reads it.")
        return redirect("campaign_play", pk=pk)
    if saved:
        campaign.refresh_from_db()
        form = None
    context = {"campaign": campaign, **state_panel(campaign, head_of(campaign), form), "state_saved": saved}
    status = 200 if saved else 400
    if request.htmx:
        return render(request, "storyapp/play.html#state", context, status=status)
    context = {**story_context(campaign, place_in(campaign, request.user)), "turn_form": TurnForm(), **context}
    return render(request, "storyapp/play.html", context, status=status)
