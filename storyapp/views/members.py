"""The members page: who plays the campaign, in which seat. The game master
invites, reseats, removes and hands the campaign over; a player renames
their own seat; any member may leave. Every write is a POST answered with a
redirect (or, for htmx, the member list again); a refusal shows the page
again with its reason and what was typed."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from ..access import Place, campaign_for, place_for, place_in
from ..members import MembershipRefused, change, hand_over, invite, leave, remove
from ..models import Campaign, Membership

PAGE = "storyapp/members.html"
NO_SEAT = "Only a player holds a seat of their own."


def _page(request: HttpRequest, place: Place, *, error: str = "", notice: str = "", typed: dict | None = None,
          status: int = 200) -> HttpResponse:
    template = PAGE + "#members" if request.htmx else PAGE
    return render(request, template, {
        "campaign": place.campaign,
        "place": place,
        "memberships": place.campaign.memberships.select_related("user"),
        "roles": Membership.Role.choices,
        "error": error,
        "notice": notice,
        "typed": typed or {},
    }, status=status)


def _done(request: HttpRequest, campaign: Campaign, message: str) -> HttpResponse:
    """After a change: the member list again with the news (htmx), or a redirect to the page."""
    if request.htmx:
        return _page(request, place_in(campaign, request.user), notice=message)
    messages.success(request, message)
    return redirect("campaign_members", pk=campaign.pk)


def _seat_fields(request: HttpRequest) -> dict:
    return {"seat_name": request.POST.get("seat_name", ""), "seat_description": request.POST.get("seat_description", "")}


@login_required
def campaign_members(request: HttpRequest, pk: int) -> HttpResponse:
    return _page(request, place_for(request, pk))


@login_required
@require_POST
def member_invite(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = campaign_for(request, pk)
    typed = {"username": request.POST.get("username", ""), "role": request.POST.get("role", ""),
             **_seat_fields(request)}
    try:
        membership = invite(campaign=campaign, **typed)
    except MembershipRefused as exc:
        return _page(request, place_in(campaign, request.user), error=str(exc), typed=typed, status=400)
    return _done(request, campaign, f"{membership.user.username} joins as {_as(membership)}.")


def _member(request: HttpRequest, pk: int, member_id: int) -> tuple[Campaign, Membership]:
    campaign = campaign_for(request, pk)
    return campaign, get_object_or_404(Membership.objects.select_related("user"), pk=member_id, campaign=campaign)


def _as(membership: Membership) -> str:
    if membership.role == Membership.Role.PLAYER:
        return f"a player, as {membership.seat_name}"
    return "a watcher"


@login_required
@require_POST
def member_change(request: HttpRequest, pk: int, member_id: int) -> HttpResponse:
    campaign, membership = _member(request, pk, member_id)
    try:
        membership = change(membership=membership, role=request.POST.get("role", ""), **_seat_fields(request))
    except MembershipRefused as exc:
        return _page(request, place_in(campaign, request.user), error=str(exc), status=400)
    return _done(request, campaign, f"{membership.user.username} is now {_as(membership)}.")


@login_required
@require_POST
def member_remove(request: HttpRequest, pk: int, member_id: int) -> HttpResponse:
    campaign, membership = _member(request, pk, member_id)
    try:
        remove(campaign=campaign, user=membership.user)
    except MembershipRefused as exc:
        return _page(request, place_in(campaign, request.user), error=str(exc), status=400)
    return _done(request, campaign, f"{membership.user.username} is no longer a member of this story.")


@login_required
@require_http_methods(["GET", "POST"])
def campaign_hand_over(request: HttpRequest, pk: int, member_id: int) -> HttpResponse:
    """Asks first (GET), then makes the member the game master (POST)."""
    campaign, membership = _member(request, pk, member_id)
    if request.method == "GET":
        return render(request, "storyapp/hand_over.html", {"campaign": campaign, "membership": membership})
    try:
        hand_over(campaign=campaign, to_user=membership.user)
    except MembershipRefused as exc:
        return _page(request, place_in(campaign, request.user), error=str(exc), status=400)
    messages.success(request, f"{membership.user.username} is now the game master of “{campaign.title}”.")
    return redirect("campaign_members", pk=campaign.pk)


@login_required
@require_POST
def seat_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """A player renames or redescribes their own seat; their role stays."""
    place = place_for(request, pk)
    if place.membership is None or place.membership.role != Membership.Role.PLAYER:
        raise PermissionDenied(NO_SEAT)
    try:
        membership = change(membership=place.membership, role=Membership.Role.PLAYER, own=True,
                            **_seat_fields(request))
    except MembershipRefused as exc:
        return _page(request, place, error=str(exc), typed=_seat_fields(request), status=400)
    return _done(request, place.campaign, f"Your seat is now {membership.seat_name}.")


@login_required
@require_POST
def member_leave(request: HttpRequest, pk: int) -> HttpResponse:
    place = place_for(request, pk)
    try:
        leave(campaign=place.campaign, user=request.user)
    except MembershipRefused as exc:
        return _page(request, place, error=str(exc), status=400)
    messages.success(request, f"You left “{place.campaign.title}”.")
    return redirect("campaign_list")
