import pytest

from tests.factories import PASSWORD, CampaignFactory, EndpointProfileFactory


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Readers are made with a password; the default hasher costs half a
    second each, which is most of this folder's run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def lexical_profile(db, model):
    """An endpoint with no embedding model: sources are indexed lexical only."""
    return EndpointProfileFactory(base_url=model.base_url, embedding_model="")


@pytest.fixture
def campaign(alice, lexical_profile):
    return CampaignFactory(owner=alice, endpoint=lexical_profile, title="The Salt Road")


@pytest.fixture
def embedded_campaign(alice, endpoint):
    return CampaignFactory(owner=alice, endpoint=endpoint, title="The Salt Road")


@pytest.fixture
def reader(client, alice):
    """The test client, signed in as alice, who owns `campaign`."""
    client.login(username="alice", password=PASSWORD)
    return client
