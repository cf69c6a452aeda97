"""The campaign list, and the ways a campaign begins or ends: created,
imported from a bundle, started from a character card, edited, deleted."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

import quotas

from .. import campaigns, cards, services
from ..access import campaign_for
from ..bundle import BundleError
from ..bundle.importer import import_and_queue
from ..bundle.validate import parse
from ..forms import BundleUploadForm, CampaignForm, CardUploadForm
from ..models import Campaign, Membership


@login_required
def campaign_list(request: HttpRequest) -> HttpResponse:
    return _campaign_list(request)


def _campaign_list(request: HttpRequest) -> HttpResponse:
    """The reader's own campaigns, and those shared with them with their
    place in each (what a row may offer depends on it)."""
    campaigns = list(Campaign.objects.of_member(request.user).select_related("head"))
    seats = {m.campaign_id: m for m in Membership.objects.filter(user=request.user)}
    for campaign in campaigns:
        campaign.membership = seats.get(campaign.pk)
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
        campaigns.campaign_room(request.user)
    except quotas.OverQuota as exc:
        messages.error(request, f"Nothing was imported: {exc}")
        return quotas.over_quota(_campaign_list(request), exc)
    if upload.size > settings.KNOWLEDGE_MAX_REQUEST_BYTES:
        messages.error(request, f"{upload.name} is too large to be a campaign bundle.")
        return redirect("campaign_list")
    try:
        campaign = import_and_queue(parse(upload.read(), name=upload.name), owner=request.user)
    except BundleError as exc:
        messages.error(request, f"Nothing was imported: {exc}")
        return redirect("campaign_list")
    except quotas.OverQuota as exc:
        messages.error(request, f"Nothing was imported: {exc}")
        return quotas.over_quota(_campaign_list(request), exc)
    messages.success(request, f"Imported “{campaign.title}”; its lore is being indexed.")
    return redirect("campaign_play", pk=campaign.pk)


@login_required
@require_http_methods(["GET", "POST"])
def campaign_create(request: HttpRequest) -> HttpResponse:
    form = CampaignForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        campaign = form.save(commit=False)
        campaign.owner = request.user
        try:
            campaigns.campaign_create(campaign=campaign, now=timezone.now())
        except quotas.OverQuota as exc:
            form.add_error(None, str(exc))
            return quotas.over_quota(render(request, "storyapp/campaign_form.html", {"form": form, "campaign": None}), exc)
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
