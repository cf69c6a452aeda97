"""The play page and the story's commands: a turn, undo, redo, retry, an
alternative chosen, an action edited or deleted, a narration stopped."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import trigger_client_event

import quotas

from .. import lineage, selectors, services, turnorder
from ..access import Place, action_for, actor_for, campaign_for, place_for, place_in, readable_action
from ..forms import ActionEditForm, TurnForm
from ..models import Campaign
from .params import number_param
from .playpage import STORY_PAGE, reading, story_context

#: Where an undo without JavaScript leaves the reader's words for the turn box.
RESTORED_TURN_KEY = "loremaster.restored_turn"


@login_required
def campaign_play(request: HttpRequest, pk: int) -> HttpResponse:
    place = place_for(request, pk)
    context = story_context(place.campaign, place)
    context["place"] = place
    context["turn_form"] = TurnForm()
    context["turn_text"] = request.session.pop(RESTORED_TURN_KEY, "")
    template = "storyapp/play.html"
    if request.htmx:
        template += "#story"
    return render(request, template, context)


@login_required
def story_earlier(request: HttpRequest, pk: int) -> HttpResponse:
    """An earlier page of the lineage, for long stories (the page shows the newest only)."""
    place = place_for(request, pk)
    campaign = place.campaign
    before = readable_action(place, number_param(request.GET.get("before")))
    if not lineage.contains(campaign.pk, campaign.head_id, before):
        raise Http404("That action is not in the story being read.")
    actions = lineage.window(campaign.pk, before.parent_id, STORY_PAGE)
    return render(request, "storyapp/play.html#earlier", {
        "campaign": campaign,
        "place": place,
        "actions": actions,
        "inspectable": selectors.with_snapshots(actions),
        "earlier": actions[0] if actions and actions[0].parent_id else None,
        **reading(place, actions),
    })


def story_response(
    request: HttpRequest, campaign: Campaign, *, error: str = "", text: str = "", status: int = 409,
    place: Place | None = None,
) -> HttpResponse:
    """The story after a command: the #story partial for htmx; without
    JavaScript, a redirect, or on a refusal the whole page again with the
    reader's typed text still in the box. A refusal is answered `status`
    (409: not now, in this story's state; 400: the input itself). The
    page is drawn for the requesting reader's place in the campaign."""
    if not request.htmx and not error:
        return redirect("campaign_play", pk=campaign.pk)
    campaign.refresh_from_db()
    place = place or place_in(campaign, request.user)
    context = story_context(campaign, place)
    context["place"] = place
    context["error"] = error
    status = status if error else 200
    if request.htmx:
        return render(request, "storyapp/play.html#story", context, status=status)
    context["turn_text"] = text
    return render(request, "storyapp/play.html", context, status=status)


@login_required
@require_POST
def turn_submit(request: HttpRequest, pk: int) -> HttpResponse:
    place = actor_for(request, pk)
    campaign = place.campaign
    form = TurnForm(request.POST)
    typed = request.POST.get("text", "")
    if not form.is_valid():
        return story_response(request, campaign, error=" ".join(form.errors.get("text", [])), text=typed, status=400,
                               place=place)
    try:
        quotas.spend(quotas.TURNS, request.user.pk)
        turnorder.submit(place=place, text=form.cleaned_data["text"], now=timezone.now())
    except services.TurnRefused as exc:
        return story_response(request, campaign, error=str(exc), text=typed, place=place)
    except quotas.OverQuota as exc:
        return quotas.over_quota(story_response(request, campaign, error=str(exc), text=typed, place=place), exc)
    response = story_response(request, campaign, place=place)
    return trigger_client_event(response, "turn-accepted") if request.htmx else response


def _story_command(request: HttpRequest, pk: int, command, *, event: str = "", rate=None) -> HttpResponse:
    """Runs a story command; `event` is told to the page when it succeeds,
    and `rate` is the reader's quota it spends."""
    campaign = campaign_for(request, pk)
    try:
        if rate is not None:
            quotas.spend(rate, request.user.pk)
        command(campaign=campaign, now=timezone.now())
    except services.TurnRefused as exc:
        return story_response(request, campaign, error=str(exc))
    except quotas.OverQuota as exc:
        return quotas.over_quota(story_response(request, campaign, error=str(exc)), exc)
    response = story_response(request, campaign)
    return trigger_client_event(response, event) if event and request.htmx else response


@login_required
@require_POST
def turn_undo(request: HttpRequest, pk: int) -> HttpResponse:
    """Takes back a whole turn; the reader's words go back into the turn box
    (by an htmx event, or through the session when the page reloads)."""
    campaign = campaign_for(request, pk)
    try:
        undone = services.turn_undo(campaign=campaign, now=timezone.now())
    except services.TurnRefused as exc:
        return story_response(request, campaign, error=str(exc))
    if not request.htmx:
        if undone.player_text:
            request.session[RESTORED_TURN_KEY] = undone.player_text
        return redirect("campaign_play", pk=campaign.pk)
    response = story_response(request, campaign)
    return trigger_client_event(response, "turn-restored", {"text": undone.player_text})


@login_required
@require_POST
def turn_redo(request: HttpRequest, pk: int) -> HttpResponse:
    return _story_command(request, pk, services.turn_redo, event="turn-redone")


@login_required
@require_POST
def turn_retry(request: HttpRequest, pk: int) -> HttpResponse:
    return _story_command(request, pk, services.turn_retry, rate=quotas.TURNS)


def _action_command(request: HttpRequest, pk: int, action_id: int, command) -> HttpResponse:
    """Runs a story command on one of the reader's actions."""
    campaign = campaign_for(request, pk)
    action = action_for(request, pk, action_id)
    try:
        command(campaign=campaign, action=action, now=timezone.now())
    except services.TurnRefused as exc:
        return story_response(request, campaign, error=str(exc))
    return story_response(request, campaign)


@login_required
@require_POST
def alternative_choose(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    return _action_command(request, pk, action_id, services.alternative_select)


@login_required
@require_POST
def action_delete(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    return _action_command(request, pk, action_id, services.action_delete)


@login_required
def action_detail(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    """One action, as the story shows it: what a finished stream swaps in."""
    place = place_for(request, pk)
    action = readable_action(place, action_id)
    if not request.htmx:
        return redirect("campaign_play", pk=pk)
    return render(request, "storyapp/play.html#action", {
        "campaign": action.campaign, "place": place, "action": action, "inspectable": selectors.with_snapshots([action]),
        **reading(place, [action]),
    })


@login_required
@require_http_methods(["GET", "POST"])
def action_edit(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    action = action_for(request, pk, action_id)
    campaign = action.campaign
    form = ActionEditForm(request.POST or None, initial={"text": action.text})
    error = ""
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            services.action_edit(campaign=campaign, action=action, text=form.cleaned_data["text"])
        except services.TurnRefused as exc:
            error, status = str(exc), 409
        else:
            if not request.htmx:
                return redirect("campaign_play", pk=pk)
            return render(request, "storyapp/play.html#action", {
                "campaign": campaign, "action": action, "inspectable": selectors.with_snapshots([action]),
                **reading(place_in(campaign, request.user), [action]),
            })
    elif request.method == "POST":
        status = 400
    template = "storyapp/action_edit.html" if request.htmx else "storyapp/action_edit_page.html"
    return render(request, template, {"campaign": campaign, "action": action, "form": form, "error": error},
                  status=status)


@login_required
@require_POST
def narration_stop(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    action = action_for(request, pk, action_id)
    services.narration_stop(action=action, now=timezone.now())
    if not request.htmx:
        return redirect("campaign_play", pk=pk)
    return HttpResponse(status=204)
