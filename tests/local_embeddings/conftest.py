"""The optional local embedding model for the tests in this folder: every
one is marked `local_embeddings` and runs only where requirements-local.txt
is installed (CI installs it in a step of its own, after the default suite)."""

from pathlib import Path

import pytest

from endpoints import localembed

HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    why = localembed.missing(localembed.MINILM)
    for item in items:
        if HERE not in Path(item.path).parents:
            continue
        item.add_marker(pytest.mark.local_embeddings)
        if why:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(autouse=True)
def worker_process(monkeypatch):
    """These tests embed as a worker does; a test elsewhere that imported the
    web application (storyapp.asgi) marked this process as a web one."""
    monkeypatch.delenv(localembed.WEB_ROLE, raising=False)


@pytest.fixture(autouse=True)
def fresh_cache(fresh_retrieval_cache):
    """Every local-embedding test starts and ends with no cached library."""


@pytest.fixture
def local_profile(db, model):
    """A profile whose passages are embedded in the worker (here, in-process)."""
    from tests.factories import EndpointProfileFactory

    return EndpointProfileFactory(base_url=model.base_url, embedding_model=localembed.MINILM)


@pytest.fixture
def local_campaign(alice, local_profile):
    from tests.factories import CampaignFactory

    return CampaignFactory(owner=alice, endpoint=local_profile, title="Two Harbours")
