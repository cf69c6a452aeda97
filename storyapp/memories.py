"""Memories: the facts a story has established, recalled by later turns.

A finished narration's accepted state events become recorded memories (a
memories job); a summary's facts become inferred ones. Both are embedded
when the campaign has an embedding model, and re-embedded in the background
when that model changes.
"""

from __future__ import annotations

from django.db import transaction

from contextbuild import memories as recorded_memories
from contextbuild.tokens import count_tokens
from endpoints.embeddings import EmbeddingFailed, EmbeddingUnavailable, embed, model_for, model_of, profile_for
from lifecycle import sending

from . import derivedjobs
from .models import Campaign, ContextSnapshot, DerivedJob, Memory

REEMBED = "storyapp.tasks.reembed_memories"


def remember(job: DerivedJob) -> None:
    narration = job.anchor
    report = ContextSnapshot.objects.filter(action=narration).values_list("report", flat=True).first() or {}
    events = ((report.get("state_events") or {}).get("applied")) or []
    texts = recorded_memories.recorded(events, narration.state or {}, protagonist=job.campaign.persona_name)
    with transaction.atomic():
        if not derivedjobs.still_mine(job):
            return
        Memory.objects.filter(anchor=narration, authority=Memory.Authority.RECORDED).delete()
        made = Memory.objects.bulk_create(
            Memory(campaign_id=job.campaign_id, anchor=narration, authority=Memory.Authority.RECORDED,
                   text=text, token_count=count_tokens(text))
            for text in texts
        )
        derivedjobs.done(job)
    embed_or_note(job, made)


def embed_or_note(job: DerivedJob, memories) -> None:
    """Embeds the new memories when the campaign has an embedding model. A
    failure leaves them to lexical recall and says so on the job."""
    memories = [m for m in memories if m.pk]
    profile = profile_for(job.campaign)
    if profile is None or not memories:
        return
    try:
        vectors = list(embed(profile, [m.text for m in memories]))
    except (EmbeddingFailed, EmbeddingUnavailable) as exc:
        derivedjobs.done(job, f"Stored without vectors (recalled by their words only): {exc}")
        return
    model = model_of(profile)
    for memory, vector in zip(memories, vectors, strict=True):
        Memory.objects.filter(pk=memory.pk).update(embedding=vector, embedding_model=model)


#: Memories embedded per request (the local backend batches on its own).
REEMBED_BATCH = 64


def refresh(*, campaign_ids) -> list[int]:
    """Queues a re-embed for each campaign holding memories whose vectors
    came from a model other than its current one; returns their ids. Recall
    reads only vectors of the current model, so until then the others are
    recalled by their words."""
    queued = []
    for campaign in Campaign.objects.filter(pk__in=list(campaign_ids)).select_related("endpoint"):
        model = model_for(campaign)
        if model and Memory.objects.filter(campaign=campaign).exclude(embedding_model=model).exists():
            sending.send_on_commit(REEMBED, campaign.pk, robust=True)
            queued.append(campaign.pk)
    return queued


def reembed(campaign_id: int) -> int:
    """Embeds the campaign's memories with its current model, a batch at a
    time; returns how many. Idempotent: only a memory still carrying another
    model's vector (or none) is written, so a second delivery does nothing.
    An endpoint failure propagates for the task to retry."""
    campaign = Campaign.objects.filter(pk=campaign_id).select_related("endpoint").first()
    profile = profile_for(campaign) if campaign is not None else None
    model = model_of(profile)
    if not model:
        return 0
    done = 0
    stale = Memory.objects.filter(campaign_id=campaign_id).exclude(embedding_model=model)
    while batch := list(stale.order_by("pk").values_list("pk", "text")[:REEMBED_BATCH]):
        vectors = list(embed(profile, [text for _, text in batch]))
        for (pk, _), vector in zip(batch, vectors, strict=True):
            Memory.objects.filter(pk=pk).exclude(embedding_model=model).update(embedding=vector, embedding_model=model)
        done += len(batch)
    return done
