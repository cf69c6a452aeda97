"""The campaign cap holds when one reader creates many campaigns at once.

The finding: 16 concurrent creates at 92 owned (cap 100) made 104, as each
counted before any of the others had stored. Counted under a lock on the
reader's row, they count one after another. PostgreSQL only: SQLite takes
its write lock at BEGIN, so its creates never overlap.
"""

import threading

import pytest
from django.db import connection
from django.utils import timezone

import quotas
from storyapp import campaigns
from storyapp.models import Campaign
from tests.factories import CampaignFactory

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the race needs concurrent writers")

THREADS = 16


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_stop_at_the_cap(alice, settings):
    settings.LOREMASTER_CAMPAIGNS_PER_READER = 5
    CampaignFactory.create_batch(2, owner=alice)
    start = threading.Barrier(THREADS)
    outcomes = []

    def create(number: int) -> None:
        try:
            start.wait(timeout=10)
            campaigns.campaign_create(campaign=Campaign(owner=alice, title=f"Race {number}"), now=timezone.now())
            outcomes.append("created")
        except quotas.OverQuota:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["created"] * 3 + ["refused"] * (THREADS - 3)
    assert Campaign.objects.filter(owner=alice).count() == 5
