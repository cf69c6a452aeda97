"""PostgreSQL's plan for the lexical search, read with EXPLAIN at the sizes
that went wrong: a 100,000-passage campaign beside a small one, right after
the bulk write (no statistics yet) and once analysed. The search must find
its matches through the (campaign, search) GIN index; a scan of the
campaign's rows cost 0.8-6 s at this size."""

import numpy as np
import pytest
from django.db import connection

from knowledge import lexical
from knowledge.lexical import postgres
from knowledge.models import KnowledgeChunk, KnowledgeSource
from tests.factories import CampaignFactory, KnowledgeSourceFactory

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner")

SYLLABLES = "ka lo ri wen tha mar el dor ys ae bri gan hol vess tor un quel sar im ost".split()


def _vocabulary(rng, size=8000):
    words = {"".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 5)))) for _ in range(size * 2)}
    return sorted(words)[:size]


def _fill(campaign, passages, rng, vocabulary, *, per_source=5000):
    weights = 1.0 / (np.arange(len(vocabulary)) + 50.0)
    weights /= weights.sum()
    for first in range(0, passages, per_source):
        count = min(per_source, passages - first)
        source = KnowledgeSourceFactory(campaign=campaign, index_state=KnowledgeSource.IndexState.READY)
        picks = rng.choice(len(vocabulary), size=(count, 60), p=weights)
        lexical.insert(rows=[
            (source.pk, campaign.pk, i, "Lore", " ".join(vocabulary[j] for j in row) + ".", 80)
            for i, row in enumerate(picks)
        ])


def _scans(node):
    yield node
    for child in node.get("Plans", ()):
        yield from _scans(child)


def _chunk_scans(campaign, words):
    plan = postgres.explain(campaign_id=campaign.pk, ranking=list(enumerate(words)), limit=40)
    return [
        (node["Node Type"], node.get("Index Name", ""))
        for node in _scans(plan["Plan"])
        if node.get("Relation Name") == "knowledge_knowledgechunk" or "knowledge_chunk" in node.get("Index Name", "")
    ]


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(7)


def test_a_large_and_a_small_campaign_search_through_the_gin_index_before_and_after_analyze(db, rng):
    vocabulary = _vocabulary(rng)
    large, small = CampaignFactory(), CampaignFactory()
    _fill(large, 100_000, rng, vocabulary)
    _fill(small, 1_000, rng, vocabulary)
    # Rare words, as knowledge.termstats chooses them, and two common ones.
    words = vocabulary[-12:] + vocabulary[:2]

    for analysed in (False, True):
        if analysed:
            postgres.refresh_statistics()
        for campaign in (large, small):
            scans = _chunk_scans(campaign, words)
            assert ("Bitmap Index Scan", postgres.INDEX_NAME) in scans, (analysed, scans)
            assert all(kind != "Seq Scan" for kind, _ in scans), (analysed, scans)

    hits = lexical.search(campaign_id=small.pk, terms=words, limit=40)
    own = set(KnowledgeChunk.objects.filter(campaign=small).values_list("pk", flat=True))
    assert hits and {h.chunk_id for h in hits} <= own


def _setting(name):
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


def test_a_search_inside_a_transaction_leaves_the_planner_as_it_was(db):
    """The test's own transaction is the caller's: its later statements must
    not be planned with the search's scans switched off."""
    campaign = CampaignFactory()
    source = KnowledgeSourceFactory(campaign=campaign, index_state=KnowledgeSource.IndexState.READY)
    lexical.insert(rows=[(source.pk, campaign.pk, 0, "Lore", "The salt road runs to the sea.", 8)])
    assert lexical.search(campaign_id=campaign.pk, terms=["salt"], limit=5)
    postgres.explain(campaign_id=campaign.pk, ranking=[(0, "salt")], limit=5)
    assert (_setting("enable_seqscan"), _setting("enable_indexscan")) == ("on", "on")
