"""What the query's words are worth: each term weighed as admission reads
it (knowledge.ranking.records.Term), and which terms a text holds. The rule
that weighs them is knowledge.ranking's, which this module calls."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from functools import lru_cache

from ..ranking.admission import lexical_verdict
from ..ranking.records import Term
from .vocabulary import passage_keys, stem, word_rank

def weigh_terms(
    terms: Sequence[str],
    standing_groups: Sequence[frozenset[str]],
    shares: Sequence[float] | None = None,
    distinctive: Collection[int] | None = None,
    broad: Collection[int] = (),
) -> tuple[Term, ...]:
    """The query's terms as admission weighs them (knowledge.ranking.records.Term).

    A term's share defaults to 1/len(terms) when `shares` does not give it;
    without `distinctive` (the terms not common in this library,
    knowledge.termstats) every term is distinctive; `broad` are those in a
    broad share of its passages (none by default). Rare and everyday are
    judged on the commoner of the word and its stem, so an inflection
    ("hanged", "pockets") is exactly as common as the word.
    """
    standing = frozenset().union(*standing_groups)
    weighed = []
    for index, term in enumerate(terms):
        key = stem(term)
        share = shares[index] if shares is not None and index < len(shares) else 1 / len(terms)
        weighed.append(
            Term(
                word=term,
                key=key,
                share=share,
                frequency_rank=min(word_rank(term), word_rank(key)),
                standing=key in standing,
                distinctive=distinctive is None or index in distinctive,
                broad=index in broad,
            )
        )
    return tuple(weighed)


def matched_terms(terms: Sequence[str], text: str, heading_path: str = "") -> frozenset[int]:
    """The indexes of the `terms` a text holds, by this module's stems: how
    a lore passage's short-term matches are confirmed, and how a memory,
    which has no lexical index, is matched at all."""
    held = passage_keys(heading_path, text)
    return frozenset(i for i, key in enumerate(_stems(tuple(terms))) if key in held)


@lru_cache(maxsize=256)
def _stems(terms: tuple[str, ...]) -> tuple[str, ...]:
    """The terms' stems, made once per query: a turn matches its terms
    against 80 passages and more."""
    return tuple(stem(term) for term in terms)


def lexical_admits(
    matched: Iterable[int],
    terms: Sequence[str],
    standing_groups: Sequence[frozenset[str]],
    shares: Sequence[float] | None = None,
    distinctive: Collection[int] | None = None,
) -> bool:
    """Whether the query words a passage matched admit it
    (knowledge.ranking.admission.lexical_verdict), for a caller holding only words."""
    return lexical_verdict(matched, weigh_terms(terms, standing_groups, shares, distinctive)).admitted


def why_not_admitted(
    matched: Iterable[int],
    terms: Sequence[str],
    standing_groups: Sequence[frozenset[str]],
    distinctive: Collection[int] | None = None,
) -> str:
    """The words of `lexical_admits`'s answer: why the matched words do not
    admit a passage."""
    return lexical_verdict(matched, weigh_terms(terms, standing_groups, None, distinctive)).why
