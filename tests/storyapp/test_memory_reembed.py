"""A campaign that switches embedding model gets its memories re-embedded in
the background, a batch at a time; recall reads only the current model's
vectors, so until then the old ones are recalled by their words."""

from endpoints.embeddings import from_bytes
from storyapp import memories as stored_memories
from storyapp.models import Memory
from tests.factories import CampaignFactory, EndpointProfileFactory, MemoryFactory


def test_switching_to_an_embedding_model_re_embeds_the_campaigns_memories(
    alice, model, django_capture_on_commit_callbacks
):
    campaign = CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url, embedding_model=""))
    MemoryFactory.create_batch(stored_memories.REEMBED_BATCH + 3, campaign=campaign)
    assert not Memory.objects.filter(campaign=campaign).exclude(embedding_model="").exists()

    with django_capture_on_commit_callbacks(execute=True):
        campaign.endpoint = EndpointProfileFactory(base_url=model.base_url, embedding_model="demo-embed")
        campaign.save()

    memories = Memory.objects.filter(campaign=campaign)
    assert {m.embedding_model for m in memories} == {"demo-embed"}
    assert all(from_bytes(m.embedding).size > 0 for m in memories)
    assert stored_memories.reembed(campaign.pk) == 0  # a second delivery finds nothing stale


def test_a_campaign_with_no_embedding_model_queues_nothing(alice, model):
    campaign = CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url, embedding_model=""))
    MemoryFactory(campaign=campaign)
    assert stored_memories.refresh(campaign_ids=[campaign.pk]) == []
    assert stored_memories.reembed(campaign.pk) == 0
