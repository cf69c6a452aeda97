import pytest
import regex

from knowledge import regexkeys
from tests.factories import CampaignFactory, EndpointProfileFactory


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
    client.force_login(alice)
    return client


@pytest.fixture
def compiles(monkeypatch):
    """Every pattern knowledge.regexkeys hands to the engine, in order."""
    seen = []
    real = regex.compile

    def counting(pattern, *args, **kwargs):
        seen.append(pattern)
        return real(pattern, *args, **kwargs)

    monkeypatch.setattr(regexkeys.regex, "compile", counting)
    return seen
