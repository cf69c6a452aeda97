"""The lexical index, through its one interface. This module runs unchanged
on whichever database the suite runs on: SQLite FTS5 or PostgreSQL."""

import pytest
from django.db import connection

from knowledge import lexical, services
from knowledge.models import KnowledgeSource
from tests.factories import CampaignFactory

HARBOUR = """# Westhaven

## The Harbour

The harbourmaster Aldric keeps the tide tables.

## The Market

Salt fish and rope are sold at dawn.
"""


def search(campaign, *terms, limit=40):
    return lexical.search(campaign_id=campaign.pk, terms=list(terms), limit=limit)


def texts(hits):
    from knowledge.models import KnowledgeChunk

    by_id = dict(KnowledgeChunk.objects.filter(pk__in=[h.chunk_id for h in hits]).values_list("pk", "text"))
    return [by_id[h.chunk_id] for h in hits]


def test_a_term_finds_the_passage_that_holds_it(campaign, library):
    library(campaign, HARBOUR)
    assert texts(search(campaign, "rope")) == ["Salt fish and rope are sold at dawn."]


def test_words_match_across_inflections(campaign, library):
    library(campaign, HARBOUR)
    assert texts(search(campaign, "tides")) == ["The harbourmaster Aldric keeps the tide tables."]


def test_heading_trail_words_match_the_passages_under_them(campaign, library):
    library(campaign, HARBOUR)
    assert texts(search(campaign, "market")) == ["Salt fish and rope are sold at dawn."]


def test_each_hit_says_which_terms_it_matched(campaign, library):
    library(campaign, HARBOUR)
    terms = ["aldric", "rope", "tide", "dragon"]
    hits = {tuple(sorted(h.matched)) for h in search(campaign, *terms)}
    assert hits == {(0, 2), (1,)}


def test_more_matched_terms_rank_higher(campaign, library):
    library(campaign, HARBOUR)
    hits = search(campaign, "aldric", "tide", "rope")
    assert texts(hits)[0] == "The harbourmaster Aldric keeps the tide tables."
    assert hits[0].score > hits[1].score


def test_nothing_matching_gives_nothing(campaign, library):
    library(campaign, HARBOUR)
    assert search(campaign, "dragon", "spaceship") == []


def test_another_campaigns_passages_are_never_returned(campaign, library, alice):
    other = CampaignFactory(owner=alice, endpoint=campaign.endpoint)
    library(other, HARBOUR)
    library(campaign, "# Elsewhere\n\nA quiet inland village.")
    assert search(campaign, "rope", "aldric") == []
    assert len(search(other, "rope", "aldric")) == 2


def test_a_campaign_whose_id_is_a_prefix_of_anothers_is_kept_apart(campaign, library, alice):
    """The campaign id is matched as a whole token: 1 is not 12."""
    others = [CampaignFactory(owner=alice, endpoint=campaign.endpoint) for _ in range(12)]
    library(others[-1], HARBOUR)
    assert all(search(c, "rope") == [] for c in [campaign, *others[:-1]])


def test_disabled_sources_are_not_searched(campaign, library):
    source = library(campaign, HARBOUR)
    KnowledgeSource.objects.filter(pk=source.pk).update(enabled=False)
    assert search(campaign, "rope") == []


@pytest.mark.parametrize("state", ["pending", "indexing", "failed"])
def test_sources_that_are_not_ready_are_not_searched(campaign, library, state):
    source = library(campaign, HARBOUR)
    KnowledgeSource.objects.filter(pk=source.pk).update(index_state=state)
    assert search(campaign, "rope") == []


def test_the_limit_bounds_the_candidates_and_keeps_the_best(campaign, library):
    text = "\n\n".join(f"# Ship {n}\n\n" + "The ship sails. " * (1 + n % 5) for n in range(30))
    library(campaign, text)
    assert len(search(campaign, "ship")) == 30
    top = search(campaign, "ship", limit=5)
    assert len(top) == 5
    assert [h.chunk_id for h in top] == [h.chunk_id for h in search(campaign, "ship")[:5]]


def test_deleting_a_source_removes_its_passages_from_the_index(campaign, library):
    source = library(campaign, HARBOUR)
    services.source_delete(source=source)
    assert search(campaign, "rope") == []
    library(campaign, HARBOUR)
    assert len(search(campaign, "rope")) == 1


def test_deleting_the_campaign_leaves_nothing_behind_in_the_index(campaign, library, alice):
    library(campaign, HARBOUR)
    campaign_id = campaign.pk
    campaign.delete()
    assert lexical.search(campaign_id=campaign_id, terms=["rope"]) == []


@pytest.mark.parametrize(
    "term",
    ['rope"', "rope OR x", "NEAR(rope tide)", "rope*", "campaign_id:1", "-rope", "'; DROP TABLE x; --", "^rope"],
)
def test_query_syntax_in_a_term_is_only_words(campaign, library, term):
    library(campaign, HARBOUR)
    hits = search(campaign, term)
    assert all(isinstance(h.chunk_id, int) for h in hits)


def test_terms_without_any_word_characters_are_ignored_and_keep_their_positions(campaign, library):
    library(campaign, HARBOUR)
    hits = search(campaign, "???", "rope")
    assert [sorted(h.matched) for h in hits] == [[1]]
    assert search(campaign, "", "   ", "!!") == []


def test_a_term_of_several_words_needs_all_of_them(campaign, library):
    library(campaign, HARBOUR)
    assert texts(search(campaign, "salt fish")) == ["Salt fish and rope are sold at dawn."]
    assert search(campaign, "salt dragon") == []


def test_the_index_is_scoped_inside_the_database_structure(db):
    """SQLite: the FTS5 table and its delete/update triggers exist. PostgreSQL:
    the GIN index covers the campaign and the search vector."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name LIKE 'knowledge_chunk_fts%'")
            names = {row[0] for row in cursor.fetchall()}
            assert {"knowledge_chunk_fts", "knowledge_chunk_fts_delete", "knowledge_chunk_fts_update"} <= names
        else:
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'knowledge_chunk_campaign_search'")
            (definition,) = cursor.fetchone()
            assert "gin (campaign_id, search)" in definition
