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


def _chunk_nodes(campaign, words):
    plan = postgres.explain(campaign_id=campaign.pk, ranking=list(enumerate(words)), limit=40)
    return [
        node for node in _scans(plan["Plan"])
        if node.get("Relation Name") == "knowledge_knowledgechunk" or "knowledge_chunk" in node.get("Index Name", "")
    ]


def _chunk_scans(campaign, words):
    return [(node["Node Type"], node.get("Index Name", "")) for node in _chunk_nodes(campaign, words)]


def _campaign_in_the_gin_index():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [postgres.INDEX_NAME])
        return "campaign_id" in cursor.fetchone()[0]


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

    if _campaign_in_the_gin_index():  # btree_gin: the campaign is matched inside the index, not row by row
        for campaign in (large, small):
            nodes = _chunk_nodes(campaign, words)
            [gin] = [n for n in nodes if n.get("Index Name") == postgres.INDEX_NAME]
            assert "campaign_id" in gin["Index Cond"], gin
            assert all(n.get("Index Name") != "knowledge_chunk_campaign" for n in nodes)

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


def _out_of_line_values(table):
    """How many values of `table` are stored in its TOAST table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = %s::regclass", [table])
        toast = cursor.fetchone()[0]
        cursor.execute(f"SELECT count(DISTINCT chunk_id) FROM {toast}")
        return cursor.fetchone()[0]


def test_a_long_passage_keeps_its_search_vector_in_its_row_and_moves_its_text_out(db):
    """Ranking reads every match's vector: out of line each one cost a TOAST
    lookup (knowledge migration 0016)."""
    rng = np.random.default_rng(3)
    vocabulary = _vocabulary(rng, 3000)
    campaign = CampaignFactory()
    source = KnowledgeSourceFactory(campaign=campaign, index_state=KnowledgeSource.IndexState.READY)
    before = _out_of_line_values("knowledge_knowledgechunk")
    text = " ".join(rng.choice(vocabulary, size=500))
    lexical.insert(rows=[(source.pk, campaign.pk, 0, "Lore", text, 700)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(text), pg_column_size(search) FROM knowledge_knowledgechunk "
                       "WHERE source_id = %s", [source.pk])
        text_size, vector_size = cursor.fetchone()
    assert text_size + vector_size > 2500  # too long for one row of 2 kB: one value must move
    assert _out_of_line_values("knowledge_knowledgechunk") == before + 1  # the text alone
    hits = lexical.search(campaign_id=campaign.pk, terms=[text.split()[0]], limit=5)
    assert [h.chunk_id for h in hits] == list(KnowledgeChunk.objects.filter(source=source).values_list("pk", flat=True))
