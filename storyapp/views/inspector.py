"""The context inspector: what the narrator was given for one turn."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from .. import inspector, selectors
from ..access import action_for
from ..models import ContextSnapshot


@login_required
def context_inspector(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    """What the narrator was given for one turn, from the turn's snapshot only."""
    action = action_for(request, pk, action_id)
    snapshot = ContextSnapshot.objects.filter(action=action).first()
    if snapshot is None:
        raise Http404("This turn has no stored context.")
    previous = selectors.previous_snapshot(action)
    report = inspector.readable(snapshot.report)
    context = {
        "campaign": action.campaign,
        "action": action,
        "snapshot": snapshot,
        "report": report,
        "sent_messages": inspector.messages(snapshot),
        "bars": inspector.budget_bars(snapshot.report),
        "knowledge": report["knowledge"],
        "changes": inspector.diff(snapshot.report, previous.report if previous else None),
    }
    template = "storyapp/inspector.html"
    if request.htmx:
        template += "#inspector"
    return render(request, template, context)
