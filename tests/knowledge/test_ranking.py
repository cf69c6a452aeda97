"""The retrieval core (knowledge.ranking): admission by each path,
ranking, suppression within a kind, the decisions' words, and memory-style
candidates. Plain records only, no database."""

import math
from dataclasses import replace

import numpy as np
import pytest

from knowledge.query import QueryInputs, assemble
from knowledge.query.weighing import matched_terms, weigh_terms
from knowledge.ranking import REDUNDANT_SIMILARITY, cosine, rank
from knowledge.ranking.admission import lexical_verdict
from knowledge.ranking.records import Candidate, Term

RARE = 1 << 30
MIDDLING = 20000
EVERYDAY = 500
FLOOR = 0.5


def term(word, *, rank=RARE, share=0.05, standing=False, distinctive=True):
    return Term(word=word, key=word, share=share, frequency_rank=rank, standing=standing, distinctive=distinctive)


#: smugglers, lantern (rare); hang, pocket (middling); bread (everyday);
#: mara (standing); harbour (common in this library); reliquary (rare, a
#: large share of the query); ash (rare and short).
TERMS = (
    term("smugglers"),
    term("lantern"),
    term("hang", rank=MIDDLING),
    term("pocket", rank=MIDDLING),
    term("bread", rank=EVERYDAY),
    term("mara", standing=True),
    term("harbour", distinctive=False),
    term("reliquary", share=0.2),
    term("ash", share=0.5),
)


def at(similarity: float) -> np.ndarray:
    """A unit vector whose cosine with [1, 0] is `similarity`."""
    return np.array([similarity, math.sqrt(1 - similarity**2)], dtype=np.float32)


BASE = np.array([1.0, 0.0], dtype=np.float32)


@pytest.mark.parametrize(
    ("matched", "admitted", "why"),
    [
        ({0, 1}, True, "admitted on lantern, smugglers"),
        ({0, 2}, True, "admitted on hang, smugglers"),
        ({2, 3}, False, "meaningful terms (hang, pocket) of which none is a rare word"),
        ({7}, True, "admitted on reliquary"),
        ({0}, False, "one meaningful term (smugglers), which alone must carry 15% of the query"),
        ({8}, False, "one meaningful term (ash), too short to admit alone"),
        ({4, 6}, False, "common words, which never admit (bread, harbour)"),
        ({5}, False, "standing entities, which never admit (mara)"),
        ({0, 5}, False, ("one meaningful term (smugglers), which alone must carry 15% of the query; "
                         "standing entities, which never admit (mara)")),
        (set(), False, "no query term matched"),
        ({0, 99}, False, "one meaningful term (smugglers), which alone must carry 15% of the query"),
    ],
)
def test_the_lexical_rule_admits_on_meaningful_terms_only_and_says_why(matched, admitted, why):
    verdict = lexical_verdict(matched, TERMS)
    assert verdict.admitted is admitted and verdict.why == why


@pytest.mark.parametrize(
    ("candidate", "by", "why"),
    [
        (Candidate(id=1, kind="reference", text="t", matched=frozenset({0, 1}), lexical=3.0),
         "lexical", "lexical: admitted on lantern, smugglers"),
        (Candidate(id=1, kind="reference", text="t", cosine=0.7),
         "semantic", "semantic: cosine 0.700 at or above the floor 0.500"),
        (Candidate(id=1, kind="reference", text="t", matched=frozenset({0, 1}), lexical=3.0, cosine=0.5),
         "both", "lexical: admitted on lantern, smugglers; semantic: cosine 0.500 at or above the floor 0.500"),
        (Candidate(id=1, kind="canon", text="t", always=True), "always", "always included"),
    ],
)
def test_each_path_admits_and_the_decision_names_it(candidate, by, why):
    ranked = rank([candidate], TERMS, floor=FLOOR)
    [offered] = ranked.offered
    assert offered.by == by and offered.why == why and offered.rank == 1
    assert offered.admitted is (by != "always")
    assert ranked.decisions == (() if by == "always" else (offered,))


@pytest.mark.parametrize(
    ("candidate", "why"),
    [
        (Candidate(id=1, kind="reference", text="t", matched=frozenset({2, 3}), lexical=3.0),
         "lexical: meaningful terms (hang, pocket) of which none is a rare word"),
        (Candidate(id=1, kind="reference", text="t", cosine=0.4999),
         "semantic: cosine 0.500 below the floor 0.500"),
        (Candidate(id=1, kind="reference", text="t", cosine=0.8, shared=frozenset({5})),
         "semantic: shares only standing entities with the query (mara)"),
        (Candidate(id=1, kind="reference", text="t", matched=frozenset({0, 1}), lexical=3.0, withdrawn="gone"),
         "lexical: admitted on lantern, smugglers; gone"),
    ],
)
def test_a_refused_candidate_is_offered_nowhere_and_says_why(candidate, why):
    ranked = rank([candidate], TERMS, floor=FLOOR)
    [decision] = ranked.decisions
    assert ranked.offered == () and ranked.rejected == 1
    assert not decision.admitted and decision.why == why


def test_a_match_by_meaning_alone_is_not_refused_for_sharing_no_words():
    candidate = Candidate(id=1, kind="reference", text="t", cosine=0.8, shared=frozenset())
    assert rank([candidate], TERMS, floor=FLOOR).offered[0].by == "semantic"


def test_an_uncalibrated_model_admits_nothing_by_cosine():
    candidate = Candidate(id=1, kind="reference", text="t", cosine=0.99)
    [decision] = rank([candidate], TERMS, floor=None).decisions
    assert not decision.admitted and "no calibrated floor" in decision.why


def test_nothing_matching_offers_nothing_however_good_it_is_relatively():
    weak = [Candidate(id=i, kind="canon", text=f"t{i}", cosine=0.1 * i, matched=frozenset({4}), lexical=i)
            for i in range(1, 5)]
    ranked = rank(weak, TERMS, floor=FLOOR)
    assert ranked.offered == () and ranked.rejected == 4


def test_ranking_normalizes_among_the_admitted_weights_the_class_and_rewards_agreement():
    ranked = rank(
        [
            Candidate(id=1, kind="inspiration", text="a", matched=frozenset({0, 1}), lexical=4.0, cosine=0.8),
            Candidate(id=2, kind="canon", text="b", matched=frozenset({0, 1}), lexical=2.0),
            Candidate(id=3, kind="reference", text="c", cosine=0.6),
            Candidate(id=4, kind="canon", text="d", matched=frozenset({4}), lexical=40.0),
        ],
        TERMS,
        floor=FLOOR,
    )
    scores = {d.candidate.id: (d.lexical, d.semantic, d.relevance, d.score) for d in ranked.offered}
    assert scores == {
        1: (1.0, 1.0, 1.15, round(1.15 * 0.7, 4)),
        2: (0.5, 0.0, 0.5, 0.5),
        3: (0.0, 0.75, 0.75, round(0.75 * 0.85, 4)),
    }
    assert [d.candidate.id for d in ranked.offered] == [1, 3, 2]


def test_always_included_candidates_come_first():
    ranked = rank(
        [
            Candidate(id=1, kind="reference", text="a", matched=frozenset({0, 1}), lexical=4.0),
            Candidate(id=2, kind="canon", text="b", always=True),
        ],
        TERMS,
        floor=FLOOR,
    )
    assert [(d.candidate.id, d.rank) for d in ranked.offered] == [(2, 1), (1, 2)]


@pytest.mark.parametrize(("similarity", "suppressed"), [(0.93, True), (0.95, True), (0.92, False)])
def test_near_duplicates_are_suppressed_at_the_redundant_similarity(similarity, suppressed):
    assert REDUNDANT_SIMILARITY == 0.93
    ranked = rank(
        [
            Candidate(id=1, kind="reference", text="a", cosine=0.9, vector=BASE),
            Candidate(id=2, kind="reference", text="b", cosine=0.8, vector=at(similarity)),
        ],
        TERMS,
        floor=FLOOR,
    )
    assert [d.candidate.id for d in ranked.suppressed] == ([2] if suppressed else [])
    if suppressed:
        [copy] = ranked.suppressed
        assert copy.duplicate_of == 1 and copy.rank is None and "a near-duplicate of #1 (cosine" in copy.why


def test_word_overlap_is_never_evidence_of_duplication():
    promised = {"kind": "reference", "matched": frozenset({0, 1}), "lexical": 3.0}
    ranked = rank(
        [
            Candidate(id=1, text="Mara promised Aldric the smugglers' lantern.", vector=BASE, **promised),
            Candidate(id=2, text="Aldric promised Mara the smugglers' lantern.", vector=at(0.5), **promised),
            Candidate(id=3, text="The smugglers' lantern: Aldric promised Mara.", **promised),
        ],
        TERMS,
        floor=FLOOR,
    )
    assert ranked.suppressed == () and len(ranked.offered) == 3


def test_identical_text_is_suppressed_within_a_kind_only():
    same = {"text": " The lantern wardens take bribes. ", "matched": frozenset({0, 1}), "lexical": 3.0}
    ranked = rank(
        [
            Candidate(id=1, kind="reference", **same),
            Candidate(id=2, kind="reference", **same),
            Candidate(id=3, kind="canon", **same),
        ],
        TERMS,
        floor=FLOOR,
    )
    assert [d.candidate.id for d in ranked.offered] == [3, 1]
    [copy] = ranked.suppressed
    assert copy.duplicate_of == 1 and copy.why.endswith("suppressed: the same text as #1")


def test_vectors_are_compared_within_a_kind_only():
    ranked = rank(
        [
            Candidate(id=1, kind="canon", text="a", cosine=0.9, vector=BASE),
            Candidate(id=2, kind="reference", text="b", cosine=0.9, vector=BASE),
        ],
        TERMS,
        floor=FLOOR,
    )
    assert ranked.suppressed == ()


def test_decisions_list_the_admitted_in_rank_order_then_the_refused_strongest_first():
    ranked = rank(
        [
            Candidate(id=1, kind="reference", text="a", matched=frozenset({4}), lexical=1.0),
            Candidate(id=2, kind="reference", text="b", matched=frozenset({0, 1}), lexical=1.0),
            Candidate(id=3, kind="reference", text="c", matched=frozenset({4}), lexical=5.0),
            Candidate(id=4, kind="canon", text="d", matched=frozenset({4}), lexical=9.0, always=True),
            Candidate(id=5, kind="canon", text="e", matched=frozenset({0, 1}), lexical=2.0),
        ],
        TERMS,
        floor=FLOOR,
    )
    assert [d.candidate.id for d in ranked.decisions] == [5, 2, 4, 3, 1]
    assert [d.candidate.id for d in ranked.offered] == [4, 5, 2]
    assert ranked.considered == 3 and ranked.rejected == 3


def test_a_limit_keeps_the_best_and_says_why_of_the_rest():
    candidates = [Candidate(id=i, kind="recorded", text=f"t{i}", cosine=0.5 + i / 10) for i in range(1, 4)]
    ranked = rank(candidates, TERMS, floor=FLOOR, limit=2)
    assert [d.candidate.id for d in ranked.offered] == [3, 2]
    [rest] = ranked.beyond_limit
    assert rest.candidate.id == 1 and rest.admitted and rest.why.endswith("ranked below the first 2")
    assert ranked.considered == 3


def test_cosine_of_unnormalized_and_zero_vectors():
    assert cosine(np.array([2.0, 0.0]), np.array([3.0, 0.0])) == pytest.approx(1.0)
    assert cosine(np.zeros(2), np.array([1.0, 0.0])) == 0.0


# ------------------------------------------------------------ memories


STATE = {
    "scene": {"summary": "Smugglers moor at the sea gate.", "location": "Westhaven harbour"},
    "entities": {"mara": {"name": "Mara Venn"}},
}


def memory_query():
    return assemble(QueryInputs.build(state=STATE, recent=["Mara watches the lantern wardens."], persona_name="Mara"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The lantern wardens took the smugglers' silver.", {"smugglers", "lantern", "wardens"}),
        ("Mara's lanterns were lit.", {"mara", "lantern"}),
        ("Nothing here about the port.", set()),
    ],
)
def test_a_memory_is_matched_by_the_query_stems(text, expected):
    q = memory_query()
    assert {q.terms[i] for i in matched_terms(q.terms, text)} == expected


def memory(id, text, authority, q, vector=None, similarity=None):
    matched = matched_terms(q.terms, text)
    return Candidate(
        id=id, kind=authority, text=text, matched=matched, shared=matched,
        lexical=float(len(matched)) if matched else None,
        cosine=similarity, vector=vector,
    )


def test_memories_without_embeddings_are_admitted_by_the_lexical_rule_and_recorded_outranks_inferred():
    q = memory_query()
    terms = weigh_terms(q.terms, q.standing, q.shares)
    ranked = rank(
        [
            memory(1, "Mara bribed the lantern wardens.", "inferred", q),
            memory(2, "The smugglers paid the lantern wardens.", "recorded", q),
            memory(3, "Mara ate bread.", "recorded", q),
        ],
        terms,
        floor=None,
    )
    assert [(d.candidate.id, d.by) for d in ranked.offered] == [(2, "lexical"), (1, "lexical")]
    [refused] = [d for d in ranked.decisions if not d.admitted]
    assert refused.candidate.id == 3 and "standing entities, which never admit (mara)" in refused.why


def test_memories_with_embeddings_follow_the_same_floor_and_suppression():
    q = memory_query()
    terms = weigh_terms(q.terms, q.standing, q.shares)
    ranked = rank(
        [
            memory(1, "The sea gate toll was paid twice.", "recorded", q, BASE, 0.8),
            memory(2, "A toll is paid twice at the sea gate.", "recorded", q, at(0.97), 0.79),
            memory(3, "A toll is paid twice at the sea gate.", "inferred", q, at(0.97), 0.79),
            memory(4, "Mara once sang in a choir.", "recorded", q, at(0.1), 0.6),
            memory(5, "It rained on the roof.", "recorded", q, at(0.2), 0.3),
        ],
        terms,
        floor=FLOOR,
    )
    assert [(d.candidate.id, d.by) for d in ranked.offered] == [(1, "semantic"), (3, "semantic")]
    assert {d.candidate.id: d.duplicate_of for d in ranked.suppressed} == {2: 1}
    refused = {d.candidate.id: d.why for d in ranked.decisions if not d.admitted}
    assert refused == {
        4: "lexical: standing entities, which never admit (mara); "
           "semantic: shares only standing entities with the query (mara)",
        5: "semantic: cosine 0.300 below the floor 0.500",
    }


def test_a_hub_is_admitted_by_meaning_only_when_its_words_agree():
    hub = Candidate(id=1, kind="inspiration", text="motto", cosine=0.8, hub="as close to 90% of the neutral scenes")
    [refused] = rank([hub], TERMS, floor=FLOOR).decisions
    assert not refused.admitted and "it is a hub (as close to 90% of the neutral scenes)" in refused.why

    agreed = Candidate(id=1, kind="inspiration", text="motto", cosine=0.8, hub="as close to 90% of the neutral scenes",
                       matched=frozenset({0, 1}), lexical=3.0)
    [admitted] = rank([agreed], TERMS, floor=FLOOR).offered
    assert admitted.by == "both"  # its words agree, so its meaning counts too

    ordinary = Candidate(id=1, kind="inspiration", text="t", cosine=0.8)
    assert rank([ordinary], TERMS, floor=FLOOR).offered[0].by == "semantic"


@pytest.mark.parametrize(
    ("matched", "similarity", "admitted"),
    [
        ({0, 1}, 0.3, False),  # two words, far in meaning: chance
        ({0, 1}, 0.6, True),  # two words, confirmed by meaning
        ({0, 1, 7}, 0.1, True),  # three words stand on their own
        ({7}, 0.1, True),  # one word that carries the query stands on its own
    ],
)
def test_a_model_that_reads_meaning_confirms_or_vetoes_a_two_word_admission(matched, similarity, admitted):
    candidate = Candidate(id=1, kind="canon", text="t", matched=frozenset(matched), lexical=2.0, cosine=similarity)
    [decision] = rank([candidate], TERMS, floor=FLOOR, confirm_pairs=True).decisions
    assert decision.admitted is admitted
    if not admitted:
        assert "its meaning does not confirm so few words (cosine 0.300 below the floor 0.500)" in decision.why
    assert rank([candidate], TERMS, floor=FLOOR).decisions[0].admitted  # without it: the words alone


def test_meaning_shared_only_through_the_cast_and_common_words_is_refused():
    candidate = Candidate(id=1, kind="canon", text="t", cosine=0.8, shared=frozenset({4, 5}))
    [decision] = rank([candidate], TERMS, floor=FLOOR).decisions
    assert not decision.admitted and "shares only standing entities with the query (mara)" in decision.why


def test_two_words_both_broad_in_the_library_are_a_generic_pair():
    hull, cargo = term("hull"), term("cargo")
    broad = (replace(hull, broad=True), replace(cargo, broad=True))
    assert not lexical_verdict({0, 1}, broad).admitted
    assert "a generic pair (cargo, hull)" in lexical_verdict({0, 1}, broad).why
    assert lexical_verdict({0, 1}, (broad[0], cargo)).admitted  # one of them specific enough
    assert lexical_verdict({0, 1, 2}, (*broad, replace(term("ballast"), broad=True))).admitted  # three stand
