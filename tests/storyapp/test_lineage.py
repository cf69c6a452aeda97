"""Reading the lineage costs time in proportion to the window, not the story."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from storyapp import lineage
from storyapp.models import Action
from tests.factories import CampaignFactory

LENGTH = 10_000
FIRST_ID = 5_000_000


@pytest.fixture
def long_story(alice):
    """A 10,000-action straight story, written in bulk with explicit ids so
    each row can name its parent."""
    campaign = CampaignFactory(owner=alice)
    Action.objects.bulk_create(
        [
            Action(
                id=FIRST_ID + depth, campaign=campaign, parent_id=FIRST_ID + depth - 1 if depth else None,
                depth=depth, kind=Action.Kind.PLAYER if depth % 2 == 0 else Action.Kind.AI,
                text=f"Action {depth}.", token_count=10,
            )
            for depth in range(LENGTH)
        ],
        batch_size=500,
    )
    campaign.head_id = FIRST_ID + LENGTH - 1
    campaign.save()
    return campaign


def test_a_window_is_one_query_returning_only_the_window(long_story):
    with CaptureQueriesContext(connection) as queries:
        window = lineage.window(long_story.pk, long_story.head_id, 40)
    assert len(queries) == 1
    assert [a.depth for a in window] == list(range(LENGTH - 40, LENGTH))


def test_window_covering_reads_until_the_budget_is_covered_in_one_query(long_story):
    with CaptureQueriesContext(connection) as queries:
        window = lineage.window_covering(long_story.pk, long_story.head_id, 1000)
    assert sum(a.token_count for a in window) == 1000
    assert window[-1].pk == long_story.head_id and len(window) == 100
    assert len(queries) == 1


def test_window_covering_keeps_the_action_that_crosses_the_budget(long_story):
    window = lineage.window_covering(long_story.pk, long_story.head_id, 995)
    assert len(window) == 100 and [a.depth for a in window] == list(range(LENGTH - 100, LENGTH))


def test_the_window_follows_the_head_not_the_newest_rows(alice):
    campaign = CampaignFactory(owner=alice)
    root = Action.objects.create(campaign=campaign, kind="player", text="Root.")
    kept = Action.objects.create(campaign=campaign, parent=root, depth=1, kind="ai", text="Kept.")
    Action.objects.create(campaign=campaign, parent=root, depth=1, kind="ai", text="Abandoned, but newer.")
    assert [a.text for a in lineage.window(campaign.pk, kept.pk, 10)] == ["Root.", "Kept."]
    assert lineage.contains(campaign.pk, kept.pk, root)
    assert not lineage.contains(campaign.pk, root.pk, kept)


def test_another_campaigns_head_reads_nothing(alice, long_story):
    other = CampaignFactory(owner=alice)
    assert lineage.window(other.pk, long_story.head_id, 10) == []
