"""The lifecycle's QuerySet, in each model's own vocabulary: narrations
(status, heartbeat), derived jobs (state, updated) and index jobs (state,
heartbeat) are claimed, found stale and requeued by the same rules."""

from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.models import IndexJob
from lifecycle import policy
from storyapp.models import Action, DerivedJob
from tests.factories import ActionFactory, CampaignFactory, IndexJobFactory, KnowledgeSourceFactory

pytestmark = pytest.mark.django_db


def _narration(**fields) -> Action:
    return ActionFactory(campaign=CampaignFactory(), kind=Action.Kind.AI, text="", **fields)


def test_of_two_workers_that_claim_one_narration_exactly_one_gets_it():
    action = _narration(status=Action.Status.PENDING)
    now = timezone.now()
    assert Action.objects.claim(action.pk, now=now, text="")
    assert not Action.objects.claim(action.pk, now=now, text="")
    action.refresh_from_db()
    assert action.status == Action.Status.STREAMING and action.heartbeat == now and action.attempts == 1


@pytest.mark.parametrize(
    ("status", "silent_for", "claimable", "stale"),
    [
        (Action.Status.PENDING, timedelta(0), True, False),
        (Action.Status.PENDING, timedelta(minutes=5), True, True),
        (Action.Status.STREAMING, timedelta(0), False, False),
        (Action.Status.STREAMING, timedelta(minutes=5), True, True),
        (Action.Status.DONE, timedelta(minutes=5), False, False),
        (Action.Status.FAILED, timedelta(minutes=5), False, False),
    ],
)
def test_a_narration_is_claimable_when_waiting_or_abandoned_and_stale_when_silent(status, silent_for, claimable, stale):
    now = timezone.now()
    action = _narration(status=status, heartbeat=now - silent_for)
    assert Action.objects.claimable(now).filter(pk=action.pk).exists() is claimable
    assert Action.objects.stale(now).filter(pk=action.pk).exists() is stale


def test_a_derived_job_is_read_off_its_updated_time():
    anchor = _narration(status=Action.Status.DONE)
    job = DerivedJob.objects.create(campaign=anchor.campaign, kind=DerivedJob.Kind.MEMORIES, anchor=anchor,
                                    key="memories:test", state=DerivedJob.State.RUNNING)
    later = timezone.now() + policy.STALE_AFTER + timedelta(seconds=1)
    assert list(DerivedJob.objects.stale(later)) == [job]
    assert DerivedJob.objects.filter(pk=job.pk).beat(now=later) == 1
    assert not DerivedJob.objects.stale(later).exists()


def test_requeue_and_fail_touch_only_work_in_flight():
    now = timezone.now()
    streaming = _narration(status=Action.Status.STREAMING, heartbeat=now)
    done = _narration(status=Action.Status.DONE)
    assert Action.objects.filter(pk__in=[streaming.pk, done.pk]).requeue(now=now) == 1
    streaming.refresh_from_db()
    assert streaming.status == Action.Status.PENDING
    assert Action.objects.filter(pk__in=[streaming.pk, done.pk]).fail(error="Ended.") == 1
    done.refresh_from_db()
    assert done.status == Action.Status.DONE


def test_an_index_job_is_held_until_sent_and_then_takes_a_share():
    job = IndexJobFactory(source=KnowledgeSourceFactory(), state=IndexJob.State.QUEUED, heartbeat=None)
    assert list(IndexJob.objects.held()) == [job] and not IndexJob.objects.sent().exists()
    IndexJob.objects.held().update(heartbeat=timezone.now())
    assert not IndexJob.objects.held().exists() and list(IndexJob.objects.sent()) == [job]
