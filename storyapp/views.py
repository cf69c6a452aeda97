"""The reader's pages: campaigns, the play page and its htmx endpoints.

Every view that takes an id loads it through `access.campaign_for` or
`access.action_for`, which filter by the requesting reader; the async stream
applies the same owner filter in its own query.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import trigger_client_event

from endpoints.client import endpoint_for
from lifecycle import workers

from . import bundle, cards, inspector, lineage, quotas, selectors, services, storyexport
from .access import action_for, campaign_for
from .forms import (
    ActionEditForm,
    BundleUploadForm,
    CampaignForm,
    CardUploadForm,
    MemoryForm,
    StateForm,
    TurnForm,
)
from .models import Action, Campaign, ContextSnapshot

STORY_PAGE = 60
STREAM_POLL_SECONDS = 0.2
STREAM_MAX_SECONDS = 15 * 60
STREAM_KEEPALIVE_SECONDS = 15
#: How often a waiting narration's stream asks whether any worker serves
#: the narration queue.
STREAM_WORKER_CHECK_SECONDS = 5
#: A pending narration with no live worker to take it.
NO_NARRATOR = "no-narrator"
#: What the page's status line says while a narration is on its way.
STREAM_STATUS = {
    Action.Status.PENDING: "Waiting for a worker…",
    Action.Status.STREAMING: "The narrator is writing…",
    NO_NARRATOR: "No narration worker is running. Your action is kept, and the narration starts when one is back.",
}
#: Where an undo without JavaScript leaves the reader's words for the turn box.
RESTORED_TURN_KEY = "loremaster.restored_turn"
#: Ids and offsets are small numbers; anything longer is not one of ours.
NUMBER_PARAM = re.compile(r"[0-9]{1,12}")


def _number_param(value: str | None, *, default: int = 0) -> int:
    """A query parameter or header that must be a plain number: a 400 otherwise, not a 500."""
    if value is None or value == "":
        return default
    if not NUMBER_PARAM.fullmatch(value):
        raise BadRequest("Expected a number.")
    return int(value)


@login_required
def campaign_list(request: HttpRequest) -> HttpResponse:
    return _campaign_list(request)


def _campaign_list(request: HttpRequest) -> HttpResponse:
    campaigns = Campaign.objects.filter(owner=request.user).select_related("head")
    return render(request, "storyapp/campaign_list.html", {"campaigns": campaigns, "import_form": BundleUploadForm()})


@login_required
@require_POST
def campaign_import(request: HttpRequest) -> HttpResponse:
    """A campaign from a bundle file; its lore is indexed by the workers."""
    form = BundleUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose a bundle file to import.")
        return redirect("campaign_list")
    upload = form.cleaned_data["bundle"]
    try:
        quotas.campaign_room(request.user)
    except quotas.OverQuota as exc:
        messages.error(request, f"Nothing was imported: {exc}")
        return quotas.over_quota(_campaign_list(request), exc)
    if upload.size > settings.KNOWLEDGE_MAX_REQUEST_BYTES:
        messages.error(request, f"{upload.name} is too large to be a campaign bundle.")
        return redirect("campaign_list")
    try:
        campaign = bundle.import_and_queue(bundle.parse(upload.read(), name=upload.name), owner=request.user)
    except bundle.BundleError as exc:
        messages.error(request, f"Nothing was imported: {exc}")
        return redirect("campaign_list")
    messages.success(request, f"Imported “{campaign.title}”; its lore is being indexed.")
    return redirect("campaign_play", pk=campaign.pk)


@login_required
def campaign_export_bundle(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    response = HttpResponse(json.dumps(bundle.export(campaign), ensure_ascii=False, indent=1),
                            content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_file_stem(campaign)}.loremaster.json"'
    return response


def _file_stem(campaign: Campaign) -> str:
    return slugify(campaign.title) or f"campaign-{campaign.pk}"


@login_required
def story_export(request: HttpRequest, pk: int, *, as_html: bool) -> HttpResponse:
    """The story being read, as Markdown or as a page to print; `?reader=0` leaves the reader's turns out."""
    campaign = campaign_for(request, pk)
    with_reader = request.GET.get("reader", "1") != "0"
    if as_html:
        return render(request, "storyapp/story_export.html", {
            "campaign": campaign, "actions": storyexport.story_actions(campaign, with_reader=with_reader),
        })
    response = HttpResponse(storyexport.as_markdown(campaign, with_reader=with_reader),
                            content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_file_stem(campaign)}.md"'
    return response


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
    return render(request, "storyapp/play.html#memory", {"campaign": campaign, "memory_form": form, "saved": saved})


def _head_of(campaign: Campaign) -> Action | None:
    return Action.objects.filter(pk=campaign.head_id).first() if campaign.head_id else None


def _state_panel(campaign: Campaign, head: Action | None, form: StateForm | None = None) -> dict:
    """The story state panel's context: the form (bound when a correction
    was refused) and whether a narration in flight holds corrections back."""
    if form is None:
        form = StateForm(state=services.current_state(campaign, head))
    return {
        "state_form": form,
        "state_busy": head is not None and head.in_flight,
    }


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
    campaign = campaign_for(request, pk)
    if request.method == "GET":
        if not request.htmx:
            return redirect(reverse("campaign_play", args=[pk]) + "#state-panel")
        context = {"campaign": campaign, **_state_panel(campaign, _head_of(campaign))}
        return render(request, "storyapp/play.html#state", context)
    form = StateForm(request.POST, state=services.current_state(campaign, _head_of(campaign)))
    saved = form.is_valid() and _state_saved(campaign, form)
    if saved and not request.htmx:
        messages.success(request, "Story state saved. The next turn reads it.")
        return redirect("campaign_play", pk=pk)
    if saved:
        campaign.refresh_from_db()
        form = None
    context = {"campaign": campaign, **_state_panel(campaign, _head_of(campaign), form), "state_saved": saved}
    if request.htmx:
        return render(request, "storyapp/play.html#state", context)
    context = {**_story_context(campaign), "turn_form": TurnForm(), **context}
    return render(request, "storyapp/play.html", context)


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


@login_required
@require_POST
def action_delete(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    return _action_command(request, pk, action_id, services.action_delete)


@login_required
@require_http_methods(["GET", "POST"])
def campaign_create(request: HttpRequest) -> HttpResponse:
    form = CampaignForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            quotas.campaign_room(request.user)
        except quotas.OverQuota as exc:
            form.add_error(None, str(exc))
            return quotas.over_quota(render(request, "storyapp/campaign_form.html", {"form": form, "campaign": None}), exc)
        campaign = form.save(commit=False)
        campaign.owner = request.user
        campaign.save()
        services.story_open(campaign=campaign, now=timezone.now())
        return redirect("campaign_play", pk=campaign.pk)
    return render(request, "storyapp/campaign_form.html", {"form": form, "campaign": None})


CARD_FORM = "storyapp/campaign_from_card.html"


@login_required
@require_http_methods(["GET", "POST"])
def campaign_from_card(request: HttpRequest) -> HttpResponse:
    """A campaign started from a character card (storyapp.cards). A refusal
    shows the form again with the reason, as any invalid form is shown (429
    over a quota), and nothing stored; the size is checked before the upload
    is read."""
    if request.method != "POST":
        return render(request, CARD_FORM, {"form": CardUploadForm()})
    form = CardUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, CARD_FORM, {"form": form})
    upload = form.cleaned_data["card"]
    try:
        cards.size_check(filename=upload.name, size=upload.size)
        campaign = cards.campaign_from_card(
            owner=request.user, filename=upload.name, data=upload.read(), greeting=form.cleaned_data["greeting"] or 0,
        )
    except quotas.OverQuota as exc:
        form.add_error(None, str(exc))
        return quotas.over_quota(render(request, CARD_FORM, {"form": form}), exc)
    except cards.CardRefused as exc:
        form.add_error(None, str(exc))
        return render(request, CARD_FORM, {"form": form})
    messages.success(request, _card_started(campaign, upload.name))
    return redirect("campaign_play", pk=campaign.pk)


def _card_started(campaign: Campaign, filename: str) -> str:
    """The success message: what the library received, and the greetings not used."""
    source = campaign.sources.get()
    entries = source.entries.count()
    if entries:
        lore = f"{entries} lorebook entr{'y' if entries == 1 else 'ies'} imported into its library, being indexed."
    else:
        lore = "The card has no lorebook entries; its library keeps the card's details."
    greetings = len(((source.metadata or {}).get("card") or {}).get("alternate_greetings") or ())
    numbers = "1" if greetings == 1 else f"1 to {greetings}"
    other = (f" The card also has {greetings} alternate greeting{'s' if greetings != 1 else ''}: to open with one, "
             f"start again from the card and choose greeting {numbers}.") if greetings else ""
    return f"Started “{campaign.title}” from {filename}. {lore}{other}"


@login_required
@require_http_methods(["GET", "POST"])
def campaign_edit(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    form = CampaignForm(request.POST or None, instance=campaign)
    if request.method == "POST" and form.is_valid():
        form.save()
        services.story_open(campaign=campaign, now=timezone.now())
        messages.success(request, "Settings saved.")
        return redirect("campaign_play", pk=campaign.pk)
    return render(request, "storyapp/campaign_form.html", {"form": form, "campaign": campaign})


@login_required
@require_http_methods(["GET", "POST"])
def campaign_delete(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    if request.method == "POST":
        title = campaign.title
        campaign.delete()
        messages.success(request, f"Deleted “{title}”.")
        return redirect("campaign_list")
    return render(request, "storyapp/campaign_delete.html", {"campaign": campaign})


def _story_context(campaign: Campaign) -> dict:
    head = Action.objects.filter(pk=campaign.head_id).first() if campaign.head_id else None
    actions = lineage.tail(campaign.pk, campaign.head_id, STORY_PAGE)
    alternatives = services.alternatives(head) if head is not None and head.kind == Action.Kind.AI else []
    profile = endpoint_for(campaign)
    index = next((i for i, a in enumerate(alternatives, 1) if a.pk == head.pk), 0) if head else 0
    return {
        "campaign": campaign,
        "head": head,
        "actions": actions,
        "inspectable": selectors.with_snapshots(actions),
        "earlier": actions[0] if actions and actions[0].parent_id else None,
        "alternatives": alternatives,
        "alternative_index": index,
        "previous_alternative": alternatives[index - 2] if index > 1 else None,
        "next_alternative": alternatives[index] if 0 < index < len(alternatives) else None,
        "can_undo": head is not None and not head.in_flight,
        "can_redo": (head is None or not head.in_flight) and services.redo_target(campaign, head) is not None,
        "endpoint": profile,
        "memory_form": MemoryForm(instance=campaign),
        "derived_trouble": selectors.derived_trouble(campaign),
        **_state_panel(campaign, head),
    }


@login_required
def campaign_play(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    context = _story_context(campaign)
    context["turn_form"] = TurnForm()
    context["turn_text"] = request.session.pop(RESTORED_TURN_KEY, "")
    template = "storyapp/play.html"
    if request.htmx:
        template += "#story"
    return render(request, template, context)


@login_required
def story_earlier(request: HttpRequest, pk: int) -> HttpResponse:
    """An earlier page of the lineage, for long stories (the page shows the newest only)."""
    campaign = campaign_for(request, pk)
    before = action_for(request, pk, _number_param(request.GET.get("before")))
    if not lineage.contains(campaign.pk, campaign.head_id, before):
        raise Http404("That action is not in the story being read.")
    actions = lineage.window(campaign.pk, before.parent_id, STORY_PAGE)
    return render(request, "storyapp/play.html#earlier", {
        "campaign": campaign,
        "actions": actions,
        "inspectable": selectors.with_snapshots(actions),
        "earlier": actions[0] if actions and actions[0].parent_id else None,
    })


def _story_response(request: HttpRequest, campaign: Campaign, *, error: str = "", text: str = "") -> HttpResponse:
    """The story after a command: the #story partial for htmx; without
    JavaScript, a redirect, or on a refusal the whole page again with the
    reader's typed text still in the box."""
    if not request.htmx and not error:
        return redirect("campaign_play", pk=campaign.pk)
    campaign.refresh_from_db()
    context = _story_context(campaign)
    context["error"] = error
    if request.htmx:
        return render(request, "storyapp/play.html#story", context)
    context["turn_text"] = text
    return render(request, "storyapp/play.html", context)


@login_required
@require_POST
def turn_submit(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    form = TurnForm(request.POST)
    typed = request.POST.get("text", "")
    if not form.is_valid():
        return _story_response(request, campaign, error=" ".join(form.errors.get("text", [])), text=typed)
    try:
        quotas.spend(quotas.TURNS, request.user.pk)
        services.turn_submit(campaign=campaign, text=form.cleaned_data["text"], now=timezone.now())
    except services.TurnRefused as exc:
        return _story_response(request, campaign, error=str(exc), text=typed)
    except quotas.OverQuota as exc:
        return quotas.over_quota(_story_response(request, campaign, error=str(exc), text=typed), exc)
    response = _story_response(request, campaign)
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
        return _story_response(request, campaign, error=str(exc))
    except quotas.OverQuota as exc:
        return quotas.over_quota(_story_response(request, campaign, error=str(exc)), exc)
    response = _story_response(request, campaign)
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
        return _story_response(request, campaign, error=str(exc))
    if not request.htmx:
        if undone.player_text:
            request.session[RESTORED_TURN_KEY] = undone.player_text
        return redirect("campaign_play", pk=campaign.pk)
    response = _story_response(request, campaign)
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
        return _story_response(request, campaign, error=str(exc))
    return _story_response(request, campaign)


@login_required
@require_POST
def alternative_choose(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    return _action_command(request, pk, action_id, services.alternative_select)


@login_required
def action_detail(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    """One action, as the story shows it: what a finished stream swaps in."""
    action = action_for(request, pk, action_id)
    if not request.htmx:
        return redirect("campaign_play", pk=pk)
    return render(request, "storyapp/play.html#action", {
        "campaign": action.campaign, "action": action, "inspectable": selectors.with_snapshots([action]),
    })


@login_required
@require_http_methods(["GET", "POST"])
def action_edit(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    action = action_for(request, pk, action_id)
    campaign = action.campaign
    form = ActionEditForm(request.POST or None, initial={"text": action.text})
    error = ""
    if request.method == "POST" and form.is_valid():
        try:
            services.action_edit(campaign=campaign, action=action, text=form.cleaned_data["text"])
        except services.TurnRefused as exc:
            error = str(exc)
        else:
            if not request.htmx:
                return redirect("campaign_play", pk=pk)
            return render(request, "storyapp/play.html#action", {
                "campaign": campaign, "action": action, "inspectable": selectors.with_snapshots([action]),
            })
    template = "storyapp/action_edit.html" if request.htmx else "storyapp/action_edit_page.html"
    return render(request, template, {"campaign": campaign, "action": action, "form": form, "error": error})


@login_required
@require_POST
def narration_stop(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    action = action_for(request, pk, action_id)
    services.narration_stop(action=action, now=timezone.now())
    if not request.htmx:
        return redirect("campaign_play", pk=pk)
    return HttpResponse(status=204)


def _sse(event: str, data: str, event_id: int | None = None) -> str:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    # A bare \r also ends an SSE line; normalise it so model output cannot
    # cut a data line short or smuggle in a field of its own.
    data = data.replace("\r\n", "\n").replace("\r", "\n")
    lines += [f"data: {line}" for line in data.split("\n")]
    return "\n".join(lines) + "\n\n"


@login_required
async def action_stream(request: HttpRequest, pk: int, action_id: int) -> HttpResponse:
    """Server-sent events for a narration being written.

    Follows the action row rather than the worker, so any web process can
    serve it and a reconnect resumes from the last event id (the length of
    text already sent). Runs as an async view: a listening reader costs a
    coroutine, not a web worker.
    """
    user = await request.auser()
    owned = Action.objects.filter(pk=action_id, campaign_id=pk, campaign__owner=user)
    if not await owned.aexists():
        raise Http404("No such narration.")
    offset = _number_param(request.headers.get("Last-Event-ID") or request.GET.get("offset"))

    async def events():
        nonlocal offset
        started = last_write = time.monotonic()
        told = None
        workers_checked, unserved = -STREAM_WORKER_CHECK_SECONDS, False
        yield "retry: 1000\n\n"
        while time.monotonic() - started < STREAM_MAX_SECONDS:
            row = await owned.values("text", "status").afirst()
            if row is None:
                break
            status = row["status"]
            if status == Action.Status.PENDING and time.monotonic() - workers_checked > STREAM_WORKER_CHECK_SECONDS:
                workers_checked = time.monotonic()
                unserved = not await sync_to_async(workers.serving)(settings.NARRATION_QUEUE, now=timezone.now())
            if status == Action.Status.PENDING and unserved:
                status = NO_NARRATOR
            if status in STREAM_STATUS and status != told:
                told = status
                yield _sse("status", STREAM_STATUS[told])
            text = row["text"]
            if len(text) < offset:
                break  # a worker took over after another died and starts afresh: the page reloads the story
            if len(text) > offset:
                yield _sse("chunk", escape(text[offset:]), len(text))
                offset = len(text)
                last_write = time.monotonic()
            if row["status"] not in (Action.Status.PENDING, Action.Status.STREAMING):
                break
            if time.monotonic() - last_write > STREAM_KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
            await asyncio.sleep(STREAM_POLL_SECONDS)
        yield _sse("done", "", offset)

    return StreamingHttpResponse(
        events(),
        content_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


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


@login_required
def connect_model(request: HttpRequest) -> HttpResponse:
    """How to connect a real model; linked from every scripted demo narration."""
    return render(request, "storyapp/connect_model.html", {"admin_url": reverse("admin:endpoints_endpointprofile_changelist")})
