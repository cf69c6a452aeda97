"""Who plays a campaign besides its owner: invitations, seats, leaving,
removal, and handing the campaign over. The members page and the
`share_campaign` command both go through here, so the rules hold alike.

The owner is the game master and never holds a membership; a player holds
a seat (a character's name, unique in the campaign however it is written,
and a short description); a watcher holds none. Every write locks the
campaign's row first, so two changes to one campaign's members (two
hand-overs, an invitation racing a seat rename) happen one after another.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

import quotas
from knowledge.models import KnowledgeSource, LoreEntry

from .campaigns import campaign_room
from .models import Campaign, Membership, Whisper

SEAT_NAME_MAX = Membership._meta.get_field("seat_name").max_length


class MembershipRefused(Exception):
    """A change to a campaign's members that its rules do not allow; the
    message says why, to the game master or the admin."""


def _locked(campaign: Campaign) -> Campaign:
    return Campaign.objects.select_for_update().get(pk=campaign.pk)


def _seat(campaign: Campaign, role: str, seat_name: str, seat_description: str,
          *, exclude: Membership | None = None) -> tuple[str, str]:
    """The seat a member of `role` holds: a free, non-empty name for a
    player; none for a watcher."""
    if role not in Membership.Role.values:
        raise MembershipRefused(f"A member is a player or a watcher, not “{role}”.")
    if role == Membership.Role.WATCHER:
        return "", ""
    name = " ".join(seat_name.split())
    if not name:
        raise MembershipRefused("A player needs a seat: the name of the character they play.")
    if len(name) > SEAT_NAME_MAX:
        raise MembershipRefused(f"A seat's name is at most {SEAT_NAME_MAX} characters.")
    taken = campaign.memberships.filter(seat_name__iexact=name)
    if exclude is not None:
        taken = taken.exclude(pk=exclude.pk)
    if taken.exists():
        raise MembershipRefused(f"Another seat of this story is already called “{name}”.")
    if name.casefold() == campaign.persona_name.strip().casefold():
        # The game master's actions are sent under the persona's name: two
        # characters of one name would make every such action ambiguous.
        raise MembershipRefused(f"“{name}” is the game master's character in this story; choose another name.")
    return name, seat_description.strip()


def _save(membership: Membership) -> Membership:
    """Saves, turning a lost race for the same reader or seat name into a refusal."""
    try:
        with transaction.atomic():
            membership.save()
    except IntegrityError as exc:
        raise MembershipRefused("Someone changed this story's members at the same moment; try again.") from exc
    return membership


@transaction.atomic
def invite(*, campaign: Campaign, username: str, role: str, seat_name: str = "",
           seat_description: str = "") -> Membership:
    """Makes an existing reader a player (with a seat) or a watcher."""
    campaign = _locked(campaign)
    user = get_user_model().objects.filter(username=username.strip(), is_active=True).first()
    if user is None:
        raise MembershipRefused(f"No reader is called “{username.strip()}”.")
    if user.pk == campaign.owner_id:
        raise MembershipRefused(f"{user.username} is this story's game master already.")
    if campaign.memberships.filter(user=user).exists():
        raise MembershipRefused(f"{user.username} is already a member of this story.")
    name, description = _seat(campaign, role, seat_name, seat_description)
    return _save(Membership(campaign=campaign, user=user, role=role, seat_name=name, seat_description=description))


def _keeps_secrets(campaign: Campaign, name: str) -> bool:
    """Whether the campaign keeps secrets for a seat of that name: whispers
    to it, or lore known to it alone (they stay when its player leaves)."""
    return (
        Whisper.objects.filter(campaign=campaign, seat_name__iexact=name).exists()
        or KnowledgeSource.objects.filter(campaign=campaign, secret_seat__iexact=name).exists()
        or LoreEntry.objects.filter(source__campaign=campaign, secret_seat__iexact=name).exists()
    )


@transaction.atomic
def change(*, membership: Membership, role: str, seat_name: str = "", seat_description: str = "",
           own: bool = False) -> Membership:
    """Gives a member another role or seat. A player renaming their own seat
    (`own`) may not take a seat the campaign keeps secrets for, which
    would let them read another character's (a departed player's, or one
    the game master prepared): the game master seats a player there."""
    _locked(membership.campaign)
    membership = Membership.objects.get(pk=membership.pk)
    name, description = _seat(membership.campaign, role, seat_name, seat_description, exclude=membership)
    if own and name.casefold() != membership.seat_name.casefold() and _keeps_secrets(membership.campaign, name):
        raise MembershipRefused(
            f"The seat “{name}” has secrets of its own character in this story; only the game master can seat you there."
        )
    membership.role, membership.seat_name, membership.seat_description = role, name, description
    return _save(membership)


def _membership(campaign: Campaign, user) -> Membership:
    membership = campaign.memberships.filter(user=user).first()
    if membership is None:
        if user.pk == campaign.owner_id:
            raise MembershipRefused("The game master cannot leave their own story; hand it over to a member first.")
        raise MembershipRefused(f"{user.username} is not a member of this story.")
    return membership


@transaction.atomic
def remove(*, campaign: Campaign, user) -> None:
    """Takes a member out of the story; their actions stay, with their seat's name."""
    _membership(_locked(campaign), user).delete()


def leave(*, campaign: Campaign, user) -> None:
    """A member leaving of their own accord: the same as being removed."""
    remove(campaign=campaign, user=user)


@transaction.atomic
def hand_over(*, campaign: Campaign, to_user) -> Campaign:
    """Makes a member the game master (the owner), in one transaction:

    1. the new owner's membership goes, since an owner holds none, and
       they must have room for one more campaign of their own (the cap
       counts owned campaigns);
    2. the old owner stays as a player, seated as the campaign's persona
       (whom they played as game master; the persona goes with them, and the
       new game master names their own) or, if that name is taken, as their
       username;
    3. the campaign's owner is the new game master.
    """
    campaign = _locked(campaign)
    old_owner = campaign.owner
    _membership(campaign, to_user).delete()
    try:
        campaign_room(to_user)
    except quotas.OverQuota as exc:
        raise MembershipRefused(
            f"{to_user.username} already owns as many campaigns as this instance allows; "
            "they cannot take this one over."
        ) from exc
    seat = next((name for name in (campaign.persona_name, old_owner.username)
                 if name.strip() and not campaign.memberships.filter(seat_name__iexact=name.strip()).exists()), None)
    if seat is None:
        raise MembershipRefused(
            f"{old_owner.username} would stay as a player, but the seats “{campaign.persona_name}” and "
            f"“{old_owner.username}” are both taken; rename one first."
        )
    _save(Membership(campaign=campaign, user=old_owner, role=Membership.Role.PLAYER, seat_name=seat.strip(),
                     seat_description=campaign.persona_description))
    campaign.owner = to_user
    fields = ["owner", "updated"]
    if seat.strip().casefold() == campaign.persona_name.strip().casefold():
        # The persona left with the old game master, as their seat: the new
        # one names their own character in the campaign's settings.
        campaign.persona_name = campaign.persona_pronouns = campaign.persona_description = ""
        fields += ["persona_name", "persona_pronouns", "persona_description"]
    campaign.save(update_fields=fields)
    return campaign
