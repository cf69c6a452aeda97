"""Which query terms the lexical ranking reads: the rarest, within a bound on
the matches the database scores, with evidence still tested on every term."""

from collections import Counter

import pytest

from knowledge import lexical, retrieval, selectors, termstats
from knowledge.query import QueryInputs
from knowledge.termstats import TermProfile, profile_for, rank_terms


@pytest.fixture(autouse=True)
def fresh_cache():
    retrieval.clear_cache()
    yield
    retrieval.clear_cache()


def profile(counts, *, passages=100, sampled=100):
    return TermProfile(stamp=(), passages=passages, sampled=sampled, counts=Counter(counts))


def harbour_library(passages=30):
    """Every passage names the harbour; one also holds the kraken."""
    sections = [f"## Berth {i}\n\nThe harbour berth {i} holds barrels of salt fish." for i in range(passages)]
    sections[7] = "## Berth 7\n\nThe harbour kraken sleeps beneath berth seven."
    return "# Harbour\n\n" + "\n\n".join(sections)


def stamp(campaign):
    return selectors.library_stamp(campaign.pk)[0]


def test_every_term_is_ranked_on_when_their_matches_fit_the_bound():
    counts = {"harbour": 40, "kraken": 1, "brine": 30}
    assert rank_terms(["harbour", "kraken", "brine"], profile(counts), budget=100) == [0, 1, 2]


def test_the_rarest_terms_are_kept_and_the_common_ones_dropped_beyond_the_bound():
    counts = {"harbour": 60, "kraken": 1, "brine": 30, "berth": 20}
    assert rank_terms(["harbour", "kraken", "brine", "berth"], profile(counts), budget=55) == [1, 2, 3]
    assert rank_terms(["harbour", "kraken", "brine", "berth"], profile(counts), budget=25) == [1, 3]


def test_the_rarest_term_is_ranked_on_even_when_it_alone_is_over_the_bound():
    counts = {"harbour": 90, "brine": 80}
    assert rank_terms(["harbour", "brine"], profile(counts), budget=10) == [1]


def test_inflections_share_a_count():
    assert profile({"harbour": 12}).expected_matches("harbours") == 12


def test_a_word_missing_from_a_partial_sample_counts_as_rarer_than_one_sampled_passage():
    partial = profile({"harbour": 10}, passages=10_000, sampled=100)
    assert partial.expected_matches("harbour") == 1000
    assert partial.expected_matches("kraken") == 50
    assert profile({}, passages=100, sampled=100).expected_matches("kraken") == 0


def test_a_small_library_is_counted_exactly(campaign, library):
    library(campaign, harbour_library(30))
    counted = profile_for(campaign.pk, stamp(campaign))
    assert (counted.passages, counted.sampled) == (30, 30)
    assert counted.expected_matches("harbour") == 30 and counted.expected_matches("kraken") == 1


def test_a_large_library_is_counted_from_an_even_sample(campaign, library, monkeypatch):
    monkeypatch.setattr(termstats, "SAMPLE_PASSAGES", 10)
    library(campaign, harbour_library(30))
    counted = profile_for(campaign.pk, stamp(campaign))
    assert (counted.passages, counted.sampled) == (30, 10)
    assert counted.expected_matches("harbour") == 30


def test_the_profile_is_recounted_when_the_library_changes(campaign, library):
    library(campaign, harbour_library(30))
    first = profile_for(campaign.pk, stamp(campaign))
    assert profile_for(campaign.pk, stamp(campaign)) is first
    library(campaign, "# Deeps\n\nA second kraken circles the reef.", filename="deeps.md")
    again = profile_for(campaign.pk, stamp(campaign))
    assert again is not first and again.expected_matches("kraken") == 2


def test_evidence_covers_every_term_though_only_some_are_ranked_on(campaign, library):
    library(campaign, harbour_library(30))
    hits = lexical.search(campaign_id=campaign.pk, terms=["harbour", "kraken"], rank_on=[1])
    assert len(hits) == 1 and hits[0].matched == frozenset({0, 1})


def test_a_passage_is_found_by_its_rare_word_and_admitted_on_both_when_common_words_are_dropped(
    campaign, library, monkeypatch
):
    monkeypatch.setattr(termstats, "RANK_MATCHES", 5)
    library(campaign, harbour_library(30))
    inputs = QueryInputs.build(state={}, recent=["The harbour kraken stirs."], persona_name="Mara")
    result = retrieval.retrieve(campaign_id=campaign.pk, query=inputs)
    assert [c.chunk_index for c in result.candidates] == [7]
    assert set(result.candidates[0].matched_terms) == {"harbour", "kraken"}
    assert result.generated == 1
    assert "harbour" in result.terms and result.rank_terms == ("kraken", "stirs")


def test_short_terms_are_ranked_on_last_as_the_stemmer_may_match_them_anywhere():
    """FTS5's Porter stemmer turns "ate" into "at", which is in most passages."""
    counts = {"kraken": 40, "brine": 30}
    assert rank_terms(["ate", "kraken", "brine"], profile(counts), budget=75) == [1, 2]
