"""The lore-size check of an index job: what its source would take stored,
against the limits (quotas.lore), before the passages go live.

Its own module because the index job asks it twice: before embedding, on
the text alone (a refused file costs no embedding calls), and before the
swap with the vectors, whose size only the embedding endpoint knows.
"""

from __future__ import annotations

from django.db.models import Count, Sum

from quotas.lore import LoreSize, lore_refusal

from .. import footprint
from ..models import KnowledgeEmbedding, KnowledgeSource

Source = KnowledgeSource


class LoreRefused(Exception):
    """The source would go over a lore-size limit; the message says which, for the reader."""


def text_bytes(source: KnowledgeSource, passages, entry_bytes: int) -> int:
    """The source's row with its text, its entries and its passages."""
    return footprint.source_bytes(
        content=source.content, entries=[entry_bytes],
        passages=(footprint.passage_bytes(p.heading_path, p.text) for p in passages), vectors=(),
    )


def vectors_bytes(vectors: list[bytes]) -> int:
    return sum(footprint.ROW_BYTES + len(vector) for vector in vectors)


def stored_vectors_bytes(source: KnowledgeSource) -> int:
    """What the source's vectors take now, for a re-embed that replaces them."""
    held = KnowledgeEmbedding.objects.filter(chunk__source=source).aggregate(n=Count("pk"), d=Sum("dimensions"))
    return (held["n"] or 0) * footprint.ROW_BYTES + (held["d"] or 0) * footprint.FLOAT_BYTES


def lore_check(source: KnowledgeSource, *, passages: int, lore_bytes: int, stored_bytes: int) -> None:
    """Raises LoreRefused when storing the source this way goes over a limit.
    The ratio is on `lore_bytes` (text, entries, passages: what the file's
    shape decides), the reader's quota on `stored_bytes` (vectors too)."""
    others = Source.objects.exclude(pk=source.pk)
    campaign_passages = others.filter(campaign_id=source.campaign_id).aggregate(n=Sum("passage_count"))["n"] or 0
    reader_bytes = others.filter(campaign__owner_id=source.campaign.owner_id).aggregate(
        n=Sum("stored_bytes"))["n"] or 0
    size = LoreSize(
        passages=passages, lore_bytes=lore_bytes, stored_bytes=stored_bytes,
        upload_bytes=source.upload_bytes or source.size_bytes,
        campaign_passages=campaign_passages, reader_bytes=reader_bytes,
    )
    refusal = lore_refusal(size)
    if refusal:
        raise LoreRefused(refusal)
