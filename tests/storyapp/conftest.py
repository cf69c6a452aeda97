import pytest
from django.utils import timezone

from storyapp import services


@pytest.fixture
def play(campaign, django_capture_on_commit_callbacks):
    """Plays one turn on the test module's `campaign`: the reader's action
    committed, its narration run as a worker would; returns both, fresh."""

    def submit(text: str):
        with django_capture_on_commit_callbacks(execute=True):
            player, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
        campaign.refresh_from_db()
        narration.refresh_from_db()
        return player, narration

    return submit
