import pytest

from tests.factories import CampaignFactory


@pytest.fixture
def embedded_campaign(alice, endpoint):
    """A campaign whose profile embeds with the demo server's model."""
    return CampaignFactory(owner=alice, endpoint=endpoint, title="The Salt Road")
