"""A summary or memory job that gave up: its notice names the action that
retries it (not Retry, which writes a new narration), and that action
queues the job again for its owner alone."""

import pytest
from django.urls import reverse

from storyapp import derived, derivedjobs
from storyapp.models import DerivedJob, Summary
from tests.factories import story


@pytest.fixture
def failed_summary(campaign, model):
    """A summary job failed for good by the model server's 500, through the worker's path."""
    actions = story(campaign, "I walk to the quay.", "Gulls wheel over the tide.", "I hail the ferryman.",
                    "The ferryman nods once.")
    job = derivedjobs.job_for(campaign.pk, DerivedJob.Kind.SUMMARY, anchor_id=actions[1].pk)
    model.script_summaries({"status": 500})
    derived.run(job.pk, final_attempt=True)
    job.refresh_from_db()
    assert job.state == DerivedJob.State.FAILED
    return job


def notice_of(page: str) -> str:
    start = page.index('class="quiet-notice')
    return page[start:page.index("</div>", start)]


def test_a_failed_summary_says_what_failed_without_sending_the_reader_to_retry(client, campaign, failed_summary):
    assert "failed with an error (500)" in failed_summary.error and "Retry" not in failed_summary.error
    client.force_login(campaign.owner)
    notice = notice_of(client.get(reverse("campaign_play", args=[campaign.pk])).content.decode())
    assert "The story summary could not be written (1 attempt)" in notice
    assert "Retry" not in notice
    assert reverse("derived_retry", args=[campaign.pk, failed_summary.pk]) in notice
    assert ">Try the summary again</button>" in notice


def test_try_again_queues_the_failed_job_and_the_worker_writes_the_summary(
    client, campaign, failed_summary, django_capture_on_commit_callbacks
):
    client.force_login(campaign.owner)
    url = reverse("derived_retry", args=[campaign.pk, failed_summary.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "quiet-notice" not in response.content.decode()
    failed_summary.refresh_from_db()
    assert failed_summary.state == DerivedJob.State.DONE and failed_summary.attempts == 1
    assert Summary.objects.filter(job=failed_summary).exists()


def test_try_again_without_javascript_redirects_and_a_get_is_refused(client, campaign, failed_summary):
    client.force_login(campaign.owner)
    url = reverse("derived_retry", args=[campaign.pk, failed_summary.pk])
    assert client.get(url).status_code == 405
    response = client.post(url)
    assert response.status_code == 302 and response["Location"] == reverse("campaign_play", args=[campaign.pk])
    failed_summary.refresh_from_db()
    assert failed_summary.state == DerivedJob.State.QUEUED and failed_summary.attempts == 0


def test_another_reader_gets_404_and_the_job_stays_failed(client, bob, campaign, failed_summary):
    client.force_login(bob)
    assert client.post(reverse("derived_retry", args=[campaign.pk, failed_summary.pk])).status_code == 404
    failed_summary.refresh_from_db()
    assert failed_summary.state == DerivedJob.State.FAILED


@pytest.mark.parametrize(("said", "kept"), [
    ("“Local” sent nothing for 30 seconds. Check that it is running and not overloaded, then press Retry. "
     "An admin can raise the first-byte timeout on the profile.",
     "“Local” sent nothing for 30 seconds. Check that it is running and not overloaded. "
     "An admin can raise the first-byte timeout on the profile."),
    ("Could not reach “Local”. Check that the server is running, then press Retry.",
     "Could not reach “Local”. Check that the server is running."),
    ("“Local” failed with an error (500). Press Retry to try again.", "“Local” failed with an error (500)."),
    ("“Local” accepted the request but ended it before writing anything. Check the model server's log; "
     "press Retry to try again.",
     "“Local” accepted the request but ended it before writing anything. Check the model server's log."),
    ("The reply from “Local” was cut off before it finished. The text so far is kept; press Retry for a new "
     "narration.", "The reply from “Local” was cut off before it finished."),
    ("The prompt was too long for “Local”. Loremaster now keeps prompts shorter for this endpoint, so press "
     "Retry. To fit the model for good, an admin can lower the budget.",
     "The prompt was too long for “Local”. Loremaster now keeps prompts shorter for this endpoint. To fit the "
     "model for good, an admin can lower the budget."),
    ("The model returned an empty summary.", "The model returned an empty summary."),
])
def test_a_jobs_error_keeps_what_failed_and_drops_the_narrations_retry_advice(said, kept):
    assert derivedjobs.without_retry_advice(said) == kept
