"""Rule 2 of knowledge.ranking, the score of one admitted candidate: each
path normalized against its best admitted value, `max + AGREEMENT × min`,
times the kind's weight. Shared by `rank` and `shortlist`, so the order a
shortlist is cut from is the order `rank` gives."""

from __future__ import annotations

from collections.abc import Iterable

from contextbuild.records import CANON, INFERRED, INSPIRATION, RECORDED, REFERENCE

from .records import LEXICAL, SEMANTIC, Candidate

#: How much agreement between the two paths is worth when ordering survivors.
AGREEMENT = 0.15
#: Authority orders what matched; it never rescues what did not. Lore:
#: Canon > Reference > Inspiration. Memories: a recorded one is accepted
#: state and an inferred one the model's reading of a turn, the same step
#: as Canon to Reference (chosen, not measured).
WEIGHTS = {CANON: 1.0, REFERENCE: 0.85, INSPIRATION: 0.7, RECORDED: 1.0, INFERRED: 0.85}
#: The weight of a kind WEIGHTS does not name.
OTHER_WEIGHT = 0.5


def path_tops(offered: Iterable[tuple[Candidate, tuple[str, ...]]]) -> tuple[float, float]:
    """The best lexical score and cosine among the offered (candidate, the
    paths that admitted it): what each path is normalized against (bm25 and
    ts_rank have no fixed range, and cosine's zero is not zero)."""
    lexical_top = semantic_top = 0.0
    for candidate, paths in offered:
        if LEXICAL in paths:
            lexical_top = max(lexical_top, candidate.lexical)
        if SEMANTIC in paths:
            semantic_top = max(semantic_top, candidate.cosine)
    return lexical_top, semantic_top


def scores(candidate: Candidate, paths: tuple[str, ...], tops: tuple[float, float]) -> tuple[float, float, float, float]:
    """Normalized lexical and semantic scores, relevance and score, rounded
    to four places (so an order can be reproduced from a stored report). A
    candidate found by one path is not thereby worse; agreement breaks ties."""
    lex = _normalized(candidate.lexical, tops[0]) if LEXICAL in paths else 0.0
    sem = _normalized(candidate.cosine, tops[1]) if SEMANTIC in paths else 0.0
    relevance = max(lex, sem) + AGREEMENT * min(lex, sem)
    weight = WEIGHTS.get(candidate.kind, OTHER_WEIGHT)
    return round(lex, 4), round(sem, 4), round(relevance, 4), round(relevance * weight, 4)


def order_key(candidate: Candidate, score: float) -> tuple:
    """Always-included candidates first, then by score; ties to the lower id."""
    return (not candidate.always, -score, candidate.id)


def _normalized(value: float, top: float) -> float:
    return value / top if top > 0 else 0.0
