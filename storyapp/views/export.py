"""Downloads: the campaign as a bundle, the story as Markdown or a page to print."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.text import slugify

from .. import storyexport
from ..access import campaign_for, place_for
from ..bundle.export import export
from ..models import Campaign


@login_required
def campaign_export_bundle(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    response = HttpResponse(json.dumps(export(campaign), ensure_ascii=False, indent=1),
                            content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_file_stem(campaign)}.loremaster.json"'
    return response


def _file_stem(campaign: Campaign) -> str:
    return slugify(campaign.title) or f"campaign-{campaign.pk}"


@login_required
def story_export(request: HttpRequest, pk: int, *, as_html: bool) -> HttpResponse:
    """The story being read, as Markdown or as a page to print, for any
    member; `?reader=0` leaves the readers' turns out."""
    place = place_for(request, pk)
    campaign = place.campaign
    with_reader = request.GET.get("reader", "1") != "0"
    if as_html:
        return render(request, "storyapp/story_export.html", {
            "campaign": campaign, "actions": storyexport.story_actions(campaign, with_reader=with_reader, held=place.is_game_master),
        })
    response = HttpResponse(storyexport.as_markdown(campaign, with_reader=with_reader, held=place.is_game_master),
                            content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_file_stem(campaign)}.md"'
    return response
