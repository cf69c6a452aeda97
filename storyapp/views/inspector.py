"""The context inspector: what the narrator was given for one turn."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from .. import inspector, review, selectors
from ..access import place_for, readable_action
from ..audiences import Viewer, messages_for, report_for
from ..models import ContextSnapshot


@login_required
def context_inspector(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    """What the narrator was given for one turn, from the turn's snapshot
    only, as far as this member may read it (storyapp.audiences): the game
    master reads all, a player their own seat's secrets and what is public."""
    place = place_for(request, pk)
    action = readable_action(place, action_id)
    viewer = Viewer.of(place)
    if action.pk in review.withheld([action], game_master=viewer.game_master):
        raise Http404("This narration is waiting for the game master's review.")
    snapshot = ContextSnapshot.objects.filter(action=action).first()
    if snapshot is None:
        raise Http404("This turn has no stored context.")
    previous = selectors.previous_snapshot(action)
    held = () if viewer.game_master else review.held_texts(action.campaign)
    shown = report_for(snapshot.report, viewer, held=held)
    report = inspector.readable(shown)
    context = {
        "campaign": action.campaign,
        "action": action,
        "place": place,
        "snapshot": snapshot,
        "report": report,
        "sent_messages": messages_for(inspector.messages(snapshot), snapshot.report, viewer, held=held),
        "bars": inspector.budget_bars(shown),
        "knowledge": report["knowledge"],
        "changes": inspector.diff(shown, report_for(previous.report, viewer, held=held) if previous else None),
        # The model's thinking read every secret of the prompt: the game master's alone.
        "thinking": action.thinking if viewer.game_master else "",
        "leaks": action.leaks if viewer.game_master else [],
    }
    template = "storyapp/inspector.html"
    if request.htmx:
        template += "#inspector"
    return render(request, template, context)
