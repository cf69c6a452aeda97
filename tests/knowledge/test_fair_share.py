"""One reader's library cannot stand in front of another reader's upload:
each reader has at most their fair share (one below the workers' slots) of
index jobs sent to the workers at once, the rest held and sent as earlier ones end; a message lost in the broker is
sent again; uploads are rate-limited per reader."""

import html
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge import services, tasks
from knowledge.models import IndexJob, KnowledgeSource
from lifecycle import policy
from tests.factories import CampaignFactory
from tests.knowledge.test_library_pages import md, post_files


@pytest.fixture
def sent(monkeypatch):
    """The job ids handed to the broker, in order (no worker runs them)."""
    ids = []
    monkeypatch.setattr(tasks.index_job, "delay", ids.append)
    return ids


def _sources(campaign, count, captured):
    with captured(execute=True):
        for n in range(count):
            services.source_create(campaign=campaign, filename=f"{campaign.title}-{n}.md", text=f"# Part {n}\n\nText {n}.")
    return list(IndexJob.objects.filter(source__campaign=campaign).order_by("pk").values_list("pk", flat=True))


def test_a_readers_many_jobs_wait_their_turn_and_another_readers_job_goes_at_once(
    alice, bob, lexical_profile, sent, django_capture_on_commit_callbacks, settings,
):
    settings.LOREMASTER_INDEX_SLOTS = 3
    share = services.fair_share(3)
    library = _sources(CampaignFactory(owner=alice, endpoint=lexical_profile, title="Big"), 6,
                       django_capture_on_commit_callbacks)
    assert sent == library[: share]
    upload = _sources(CampaignFactory(owner=bob, endpoint=lexical_profile, title="Small"), 1,
                      django_capture_on_commit_callbacks)
    assert sent[-1] == upload[0], "the other reader's job is sent at once, not after the library"
    held = IndexJob.objects.filter(pk__in=library, state=IndexJob.State.QUEUED, heartbeat__isnull=True)
    assert held.count() == 6 - share

    with django_capture_on_commit_callbacks(execute=True):
        services.job_run(job_id=library[0], now=timezone.now())
    assert IndexJob.objects.get(pk=library[0]).state == IndexJob.State.DONE
    assert sent[-1] == library[share], "a finished job lets the reader's next one go"


@pytest.mark.parametrize(("slots", "share"), [(1, 1), (2, 1), (3, 2), (8, 7)])
def test_a_readers_share_is_one_below_the_slots(slots, share):
    assert services.fair_share(slots) == share


def test_with_two_slots_a_second_reader_always_finds_one_free(
    alice, bob, lexical_profile, sent, django_capture_on_commit_callbacks, settings,
):
    """The finding: a share of 2 on a worker of 2 slots let a 3-file import
    take both, and another reader's one-line upload waited 62.5 s."""
    settings.LOREMASTER_INDEX_SLOTS = 2
    library = _sources(CampaignFactory(owner=alice, endpoint=lexical_profile, title="Big"), 3,
                       django_capture_on_commit_callbacks)
    assert sent == library[:1], "the importing reader holds one slot, not both"
    upload = _sources(CampaignFactory(owner=bob, endpoint=lexical_profile, title="Small"), 1,
                      django_capture_on_commit_callbacks)
    assert sent == [library[0], upload[0]]
    assert services.dispatch(owner_id=alice.pk) == [], "nothing more goes while alice's first job is in flight"
    assert IndexJob.objects.sent().count() == 2


def test_a_job_whose_message_was_lost_is_sent_again(alice, lexical_profile, sent, django_capture_on_commit_callbacks):
    [job_id] = _sources(CampaignFactory(owner=alice, endpoint=lexical_profile, title="One"), 1,
                        django_capture_on_commit_callbacks)
    assert services.jobs_resend_lost(now=timezone.now()) == [], "a message just sent is left to arrive"
    later = timezone.now() + policy.STALE_AFTER + timedelta(seconds=1)
    assert services.jobs_resend_lost(now=later) == [job_id]
    assert sent == [job_id, job_id]


def test_a_restarted_worker_sends_again_at_once_what_its_predecessor_had_fetched(
    alice, lexical_profile, sent, django_capture_on_commit_callbacks,
):
    """A message fetched and not yet started dies with its worker; the worker
    that returns sends the job again as it starts, not STALE_AFTER later."""
    [job_id] = _sources(CampaignFactory(owner=alice, endpoint=lexical_profile, title="One"), 1,
                        django_capture_on_commit_callbacks)
    IndexJob.objects.filter(pk=job_id).update(heartbeat=timezone.now() - timedelta(seconds=2))
    with django_capture_on_commit_callbacks(execute=True):
        assert services.jobs_reclaim(now=timezone.now(), restarted_worker="elsewhere:1") == [job_id]
    assert sent == [job_id, job_id]


def test_a_job_waiting_for_its_retry_is_not_taken_for_lost(alice, lexical_profile, sent, django_capture_on_commit_callbacks):
    [job_id] = _sources(CampaignFactory(owner=alice, endpoint=lexical_profile, title="One"), 1,
                        django_capture_on_commit_callbacks)
    IndexJob.objects.filter(pk=job_id).update(heartbeat=timezone.now() + timedelta(seconds=300))
    assert services.jobs_resend_lost(now=timezone.now() + policy.STALE_AFTER * 2) == []


def test_uploads_over_the_readers_rate_get_429_and_store_nothing(reader, campaign, settings, one_quota_window):
    settings.LOREMASTER_READER_RATES = {**settings.LOREMASTER_READER_RATES, "uploads": 2}
    assert post_files(reader, campaign, md("a.md", "# A\n\nAlpha.")).status_code == 200
    response = post_files(reader, campaign, md("b.md", "# B\n\nBeta."), md("c.md", "# C\n\nGamma."))
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    page = html.unescape(response.content.decode())
    assert "limit of 2 lore files uploaded in an hour" in page and "nothing from this upload was stored" in page
    assert list(KnowledgeSource.objects.values_list("original_filename", flat=True)) == ["a.md"]
    without_htmx = reader.post(reverse("library_upload", kwargs={"pk": campaign.pk}),
                               {"files": [md("d.md", "# D\n\nDelta."), md("e.md", "# E\n\nEps.")],
                                "classification": "reference", "visibility": "visible"})
    assert without_htmx.status_code == 429 and "limit of 2" in without_htmx.content.decode()
