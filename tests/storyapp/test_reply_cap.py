"""A server that ignores max_tokens cannot store megabytes into a narration (issue 13, finding 8)."""

from django.utils import timezone

from endpoints.streaming import REPLY_CHARS_MARGIN, REPLY_CHARS_PER_TOKEN
from storyapp import services
from storyapp.models import Action
from tests.factories import CampaignFactory


def test_an_endless_reply_is_cut_at_the_profiles_output_limit(alice, endpoint, model,
                                                             django_capture_on_commit_callbacks):
    # One "word" of 3 MB: the demo server's max_tokens cut counts words, so it
    # streams all of it, as a hostile server would.
    model.script({"reply": "A" * 3_000_000})
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    with django_capture_on_commit_callbacks(execute=True):
        _, narration = services.turn_submit(campaign=campaign, text="I wait.", now=timezone.now())
    narration.refresh_from_db()
    limit = endpoint.max_output_tokens * REPLY_CHARS_PER_TOKEN + REPLY_CHARS_MARGIN
    assert narration.status == Action.Status.DONE
    assert 0 < len(narration.text) <= limit
