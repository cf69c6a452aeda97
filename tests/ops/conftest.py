import pytest

from tests.factories import CampaignFactory, EndpointProfileFactory


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Operators are made with a password; the default hasher costs half a
    second each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def campaign(alice, model):
    """A campaign whose endpoint has no embedding model (as the library's tests')."""
    return CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url, embedding_model=""),
                           title="The Salt Road")
