"""Work a fault left hanging is repaired by the workers' sweep within the
same minute: a lost message is sent again, a dead worker's narration goes to
another, and a live worker waiting on its model is never taken for dead."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from lifecycle import beat, policy
from storyapp import derivedjobs, narration, services
from storyapp.models import Action, DerivedJob
from tests.factories import ActionFactory, CampaignFactory


def _stale():
    return timezone.now() - policy.STALE_AFTER - timedelta(seconds=1)


def test_the_stale_figures_repair_a_fault_within_a_minute():
    """A killed worker's last beat, the wait until it is stale, and the
    sweep that notices, leave most of the minute for the narration itself."""
    worst = policy.BEAT_SECONDS + policy.STALE_AFTER.total_seconds() + policy.SWEEP_SECONDS
    assert worst <= 40


def test_a_dead_workers_narration_goes_to_another_and_counts_the_attempt(campaign, model):
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="Half a sen",
                           status=Action.Status.STREAMING, heartbeat=_stale(), attempts=1)
    model.script({"reply": "A whole sentence."})
    assert narration.recover_stale(now=timezone.now()) == 1
    action.refresh_from_db()
    assert (action.status, action.text, action.attempts) == (Action.Status.DONE, "A whole sentence.", 2)


def test_a_narration_that_kept_killing_its_workers_fails_with_retry(campaign, model):
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="Half",
                           status=Action.Status.STREAMING, heartbeat=_stale(), attempts=Action.MAX_ATTEMPTS)
    assert narration.recover_stale(now=timezone.now()) == 1
    action.refresh_from_db()
    assert action.status == Action.Status.FAILED
    assert "stopped 3 times" in action.error and "Retry" in action.error
    assert model.requests() == []


def test_a_lost_message_is_sent_again_once_a_period(campaign, model):
    waiting = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.PENDING,
                            heartbeat=timezone.now())
    assert narration.recover_stale(now=timezone.now()) == 0, "a narration just queued is left to its message"
    Action.objects.filter(pk=waiting.pk).update(heartbeat=_stale())
    model.script({"reply": "Here at last."})
    assert narration.recover_stale(now=timezone.now()) == 1
    waiting.refresh_from_db()
    assert waiting.status == Action.Status.DONE


def test_a_retry_starts_the_attempts_afresh(campaign, model, django_capture_on_commit_callbacks):
    failed = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.FAILED,
                           attempts=Action.MAX_ATTEMPTS)
    campaign.head = failed
    campaign.save()
    model.script({"reply": "Again."})
    with django_capture_on_commit_callbacks(execute=True):
        services.turn_retry(campaign=campaign, now=timezone.now())
    failed.refresh_from_db()
    assert (failed.status, failed.attempts) == (Action.Status.DONE, 1)


@pytest.mark.django_db(transaction=True)
def test_a_worker_waiting_on_a_slow_model_keeps_its_narration_alive(alice, endpoint, model, monkeypatch):
    """No text arrives for a while, yet the heartbeat moves: the sweep leaves it be."""
    monkeypatch.setattr(policy, "BEAT_SECONDS", 0.2)
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    action = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="", status=Action.Status.PENDING,
                           heartbeat=timezone.now())
    model.script({"reply": "Slowly, the door.", "stall": 1.5})
    worker = threading.Thread(target=narration.narrate, args=(action.pk,))
    worker.start()
    beats = set()
    while worker.is_alive():
        row = Action.objects.values("status", "text", "heartbeat").get(pk=action.pk)
        if row["status"] == Action.Status.STREAMING and not row["text"]:
            beats.add(row["heartbeat"])
        time.sleep(0.1)
    worker.join()
    assert len(beats) >= 4, "the heartbeat moved while the model was silent"
    assert Action.objects.get(pk=action.pk).status == Action.Status.DONE


def test_work_inside_a_transaction_does_not_beat(db):
    """Its rows are invisible to others until it commits, and a beat from
    another connection would wait on the work's own locks."""
    touched = []
    with transaction.atomic(), beat.beating(lambda: touched.append(1), every=0.01):
        time.sleep(0.1)
    assert touched == []


@pytest.mark.django_db(transaction=True)
def test_work_outside_a_transaction_beats_until_it_ends():
    touched = []
    with beat.beating(lambda: touched.append(1), every=0.01):
        time.sleep(0.2)
    count = len(touched)
    time.sleep(0.05)
    assert count >= 5 and len(touched) == count


def test_a_summary_waiting_for_its_next_attempt_is_not_taken_for_lost(campaign):
    anchor = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="Done.")
    job = DerivedJob.objects.create(campaign=campaign, kind=DerivedJob.Kind.SUMMARY, anchor=anchor,
                                    key="summary:test", state=DerivedJob.State.RUNNING, attempts=2)
    with pytest.raises(policy.RetryLater) as raised:
        derivedjobs.failed(job, "The summarizer is down.", final=False)
    assert raised.value.countdown == policy.backoff(2)
    job.refresh_from_db()
    assert job.state == DerivedJob.State.QUEUED
    assert not DerivedJob.objects.stale(timezone.now()).filter(pk=job.pk).exists()
    DerivedJob.objects.filter(pk=job.pk).update(updated=_stale())
    assert DerivedJob.objects.stale(timezone.now()).filter(pk=job.pk).exists()
