"""The operators' job monitor: staff only, every job, retry and cancel."""

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge.models import IndexJob, KnowledgeSource
from ops.models import WorkerHeartbeat
from tests.factories import IndexJobFactory, KnowledgeSourceFactory, UserFactory


@pytest.fixture
def operator(client, db):
    client.force_login(UserFactory(username="olga", is_staff=True))
    return client


@pytest.fixture
def failed_job(campaign):
    source = KnowledgeSourceFactory(campaign=campaign, title="Westhaven", index_state="failed", error="boom")
    return IndexJobFactory(source=source, state=IndexJob.State.FAILED, attempts=3, progress=40,
                           error="Could not reach the endpoint.\n\nTraceback (most recent call last): <frame>")


def test_a_reader_who_is_not_staff_gets_404(client, alice, failed_job):
    client.force_login(alice)
    assert client.get(reverse("job_monitor")).status_code == 404
    assert client.post(reverse("job_retry", kwargs={"job_id": failed_job.pk})).status_code == 404
    assert client.post(reverse("job_cancel", kwargs={"job_id": failed_job.pk})).status_code == 404
    assert IndexJob.objects.count() == 1


def test_an_anonymous_visitor_is_sent_to_log_in(client, db):
    response = client.get(reverse("job_monitor"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_monitor_shows_every_job_with_its_full_error(operator, failed_job):
    page = operator.get(reverse("job_monitor")).content.decode()
    assert "Westhaven" in page and failed_job.source.campaign.title in page
    assert "Could not reach the endpoint." in page and "Traceback (most recent call last): &lt;frame&gt;" in page
    assert "40%" in page


def test_the_monitor_filters_by_state(operator, failed_job, campaign):
    IndexJobFactory(source=KnowledgeSourceFactory(campaign=campaign, title="Queued lore"))
    failed = operator.get(reverse("job_monitor") + "?state=failed").content.decode()
    queued = operator.get(reverse("job_monitor") + "?state=queued").content.decode()
    assert "Westhaven" in failed and "Queued lore" not in failed
    assert "Queued lore" in queued and "Westhaven" not in queued


def test_queue_depth_and_worker_liveness_are_shown(operator, campaign):
    for _ in range(3):
        IndexJobFactory(source=KnowledgeSourceFactory(campaign=campaign))
    page = operator.get(reverse("job_monitor")).content.decode()
    assert "<strong>3</strong> queued" in page and "No worker alive" in page
    WorkerHeartbeat.objects.create(name="host:1", seen=timezone.now())
    assert "1 worker alive" in operator.get(reverse("job_monitor")).content.decode()


def test_retry_queues_the_work_again_and_it_runs(operator, failed_job, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        operator.post(reverse("job_retry", kwargs={"job_id": failed_job.pk}))
    source = KnowledgeSource.objects.get(pk=failed_job.source_id)
    assert source.index_state == KnowledgeSource.IndexState.READY
    assert source.jobs.filter(state=IndexJob.State.DONE).count() == 1
    failed_job.refresh_from_db()
    assert failed_job.state == IndexJob.State.FAILED


def test_cancel_stops_a_queued_job(operator, campaign):
    job = IndexJobFactory(source=KnowledgeSourceFactory(campaign=campaign))
    operator.post(reverse("job_cancel", kwargs={"job_id": job.pk}))
    job.refresh_from_db()
    assert job.state == IndexJob.State.CANCELLED
    assert job.source.index_state == KnowledgeSource.IndexState.FAILED


def test_the_admin_reindexes_selected_sources(operator, campaign, library, django_capture_on_commit_callbacks):
    UserFactory._meta.model.objects.filter(username="olga").update(is_superuser=True)
    source = library(campaign, "# A\n\nText.")
    with django_capture_on_commit_callbacks(execute=True):
        operator.post(reverse("admin:knowledge_knowledgesource_changelist"),
                      {"action": "reindex_sources", "_selected_action": [source.pk]})
    assert source.jobs.filter(state=IndexJob.State.DONE).count() == 2


def test_a_stuck_narration_can_be_requeued_or_failed_from_the_monitor(operator, client, alice, endpoint, model,
                                                                      django_capture_on_commit_callbacks):
    from datetime import timedelta

    from storyapp.models import Action
    from tests.factories import ActionFactory, CampaignFactory

    story = CampaignFactory(owner=alice, endpoint=endpoint)
    stale = timezone.now() - timedelta(minutes=10)
    stuck = ActionFactory(campaign=story, kind=Action.Kind.AI, text="", status=Action.Status.STREAMING, heartbeat=stale)
    lost = ActionFactory(campaign=story, kind=Action.Kind.AI, text="", status=Action.Status.PENDING, heartbeat=stale)
    page = operator.get(reverse("job_monitor")).content.decode()
    assert reverse("narration_requeue", args=[stuck.pk]) in page and reverse("narration_fail", args=[lost.pk]) in page
    model.script({"reply": "Written at last."})
    with django_capture_on_commit_callbacks(execute=True):
        operator.post(reverse("narration_requeue", args=[stuck.pk]))
    operator.post(reverse("narration_fail", args=[lost.pk]))
    stuck.refresh_from_db()
    lost.refresh_from_db()
    assert stuck.status == Action.Status.DONE and stuck.text == "Written at last."
    assert lost.status == Action.Status.FAILED and "operator ended" in lost.error
    client.logout()
    client.force_login(alice)
    assert client.post(reverse("narration_fail", args=[stuck.pk])).status_code == 404, "staff only"
