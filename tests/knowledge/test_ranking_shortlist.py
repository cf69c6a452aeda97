"""knowledge.ranking.shortlist: ranking the shortlist, loaded in full,
offers what ranking every candidate would. Plain records, no database."""

import random

import numpy as np
import pytest

from knowledge.ranking import rank, shortlist
from knowledge.ranking.records import Candidate
from tests.knowledge.test_ranking import FLOOR, TERMS

LIMIT = 6


def _bank(seed: int, size: int = 300) -> list[Candidate]:
    """Memories with overlapping words, repeated texts and near-identical vectors."""
    rng = random.Random(seed)
    base = [np.array([rng.random() for _ in range(8)], dtype=np.float32) for _ in range(5)]
    bank = []
    for i in range(size):
        matched = frozenset(rng.sample(range(len(TERMS)), rng.randint(0, 4)))
        vector = base[rng.randrange(5)] + np.float32(rng.random() * 0.05)
        similarity = rng.random() if rng.random() < 0.6 else None
        bank.append(Candidate(
            id=i, kind=rng.choice(["recorded", "inferred"]), text=f"fact {rng.randrange(40)}", matched=matched,
            lexical=float(len(matched)) if matched else None, cosine=similarity, shared=matched, vector=vector,
        ))
    return bank


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("floor", [None, FLOOR])
def test_ranking_the_shortlist_offers_what_ranking_everything_offers(seed, floor):
    bank = _bank(seed)
    whole = {c.id: c for c in bank}
    light = [Candidate(id=c.id, kind=c.kind, text="", matched=c.matched, lexical=c.lexical, cosine=c.cosine,
                       shared=c.shared) for c in bank]
    count = 4 * LIMIT
    while True:
        picked, complete = shortlist(light, TERMS, floor=floor, count=count)
        first = {c.id for c in picked[:count]}
        ranked = rank([whole[c.id] for c in picked], TERMS, floor=floor, limit=LIMIT)
        if complete or (len(ranked.offered) == LIMIT and ranked.offered[-1].candidate.id in first):
            break
        count *= 4
    expected = rank(bank, TERMS, floor=floor, limit=LIMIT)
    assert [(d.candidate.id, d.score) for d in ranked.offered] == [(d.candidate.id, d.score) for d in expected.offered]


def test_a_shortlist_holds_no_candidate_that_nothing_admits():
    nothing = [Candidate(id=1, kind="recorded", text="", matched=frozenset({4}), lexical=1.0, shared=frozenset({4}))]
    assert shortlist(nothing, TERMS, floor=None, count=10) == ((), True)
