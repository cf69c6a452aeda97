import pytest

from tests.factories import CampaignFactory


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Readers are made with a password; the default hasher costs half a
    second each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def embedded_campaign(alice, endpoint):
    """A campaign whose profile embeds with the demo server's model."""
    return CampaignFactory(owner=alice, endpoint=endpoint, title="The Salt Road")
