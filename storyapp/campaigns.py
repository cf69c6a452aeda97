"""Creating a campaign, within the number its owner may have.

Every way a campaign is made (the form, a card, a bundle) asks
`campaign_room` inside the transaction that creates it, so the cap holds
under concurrent creates.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

import quotas

from .models import Campaign
from .services import story_open


def campaign_room(reader) -> None:
    """Raises OverQuota when the reader owns as many campaigns as they may.

    Inside a transaction, where a campaign is created, the reader's user row
    is locked first, so one reader's concurrent creates count one after
    another and the cap holds (16 at once at 92 owned made 104); SQLite
    takes its write lock at BEGIN, which serialises them anyway. Outside
    one it is an early refusal, and the creating transaction asks again.
    """
    if transaction.get_connection().in_atomic_block:
        list(get_user_model().objects.select_for_update().filter(pk=reader.pk).values_list("pk", flat=True))
    owned = Campaign.objects.filter(owner=reader).count()
    cap = settings.LOREMASTER_CAMPAIGNS_PER_READER
    if owned >= cap:
        raise quotas.OverQuota(
            f"You already have {owned} campaigns, this instance's limit. Delete one you no longer need to start another."
        )


@transaction.atomic
def campaign_create(*, campaign: Campaign, now: datetime) -> Campaign:
    """Stores the new campaign its owner filled in, within their cap
    (OverQuota, nothing stored), and opens its story."""
    campaign_room(campaign.owner)
    campaign.save()
    story_open(campaign=campaign, now=now)
    return campaign
