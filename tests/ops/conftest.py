import pytest

from tests.factories import CampaignFactory, EndpointProfileFactory


@pytest.fixture
def campaign(alice, model):
    """A campaign whose endpoint has no embedding model (as the library's tests')."""
    return CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url, embedding_model=""),
                           title="The Salt Road")
