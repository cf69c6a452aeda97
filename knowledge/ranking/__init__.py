"""The retrieval core: admission, ranking, near-duplicate suppression, and
why, for lore passages and story memories alike (DESIGN.md §5).

Pure: plain records in, plain records out. It imports nothing of Django,
of the ORM or of the rest of `knowledge`; `knowledge.retrieval` loads
passages and hands them over, and the memory retrieval does the same with
memories. Two contracts in `.importlinter` keep it so. It sits below
`knowledge.query` (which owns words and stems, and calls `lexical_verdict`
for its own `lexical_admits`), so the rule is stated here alone.

The records are in `records`, admission (rule 1) in `admission`, the
score (rule 2) in `scoring`; ranking and suppression (rules 2 and 3), which
read the admitted together, are here. `shortlist` orders many candidates as
`rank` would before their texts and vectors are loaded (the memory bank's
recall, storyapp.recall).

## The API

    rank(candidates: Sequence[Candidate], terms: Sequence[Term], *,
         floor: float | None, limit: int | None = None) -> Ranked
    lexical_verdict(matched: Iterable[int], terms: Sequence[Term]) -> Verdict
    cosine(a: np.ndarray, b: np.ndarray) -> float

* `Term` is one query term as admission weighs it: its word, stem, share of
  the query, English frequency rank, whether it names a standing entity and
  whether it is distinctive in this library. `knowledge.query.weighing.weigh_terms`
  builds them from an assembled `Query`; that module owns words, this one
  owns what they are worth.
* `Candidate` is one thing that might be shown: an id, a `kind` (its class
  weight and its suppression group: `canon`/`reference`/`inspiration` for a
  passage, `recorded`/`inferred` for a memory), its text, the query term
  indexes the lexical path matched and its raw lexical score (None when that
  path did not find it), its cosine with the query (None without
  embeddings), the term indexes its text shares with the query (for the
  standing-names rule), its vector (for suppression), whether it is
  always included. (A lorebook entry's keys are World Info's to apply,
  worldinfo.engine: its passages are never candidates of the lexical path.)
* `Decision` is the one decision type: admitted or not, by what
  (`lexical`, `semantic`, `both`, or `always` for an always-included passage
  the rule did not admit), the normalized scores, relevance, score, rank,
  `duplicate_of`, and `why` in words.
* `Ranked` holds the offered decisions in rank order, the suppressed ones,
  those past `limit`, and one decision per candidate a search path found.

A memory, which has no lexical index, gets its matched terms from
`knowledge.query.weighing.matched_terms` (the same stems lore matching confirms
short terms with), passes them as both `matched` and `shared`, their count
as `lexical`, and its cosine with the query vector when both have one; the
floor is the embedding model's, as for lore (`knowledge.retrieval.semantic_floor`):

    q = assemble(inputs)
    terms = weigh_terms(q.terms, q.standing, q.shares)
    matched = matched_terms(q.terms, memory.text)
    candidate = Candidate(
        id=memory.pk, kind=memory.authority, text=memory.text,
        matched=matched, shared=matched, lexical=float(len(matched)) if matched else None,
        cosine=cosine(query_vector, vector) if vector is not None else None, vector=vector,
    )
    ranked = rank(candidates, terms, floor=floor, limit=top_k)

## The rules, once

1. Admission looks at each candidate alone. Lexically (`lexical_verdict`):
   LEXICAL_MIN_SIGNALS distinct meaningful terms, one of them a rare word,
   or one meaningful term long enough that carries
   LEXICAL_SINGLE_TERM_SHARE of the query. A term is meaningful when it is
   not a standing entity, not an everyday English word (COMMON_WORD_RANK)
   and distinctive in the library. Semantically: cosine ≥ the floor
   calibrated for exactly this embedding model; with no floor, the path
   admits nothing (another model's floor is never borrowed). A candidate
   admitted by cosine alone that shares the cast's names and no meaningful
   word is refused: the cast is in every query. A hub (`Candidate.hub`:
   close to almost any scene, knowledge.hubs) is admitted by cosine only
   when its words admit it too. With `confirm_pairs` (a model shipped as
   reading meaning), a lexical admission on just two words needs its cosine
   at the floor. Nothing compares a candidate
   with the others, so a library in which nothing matches offers nothing.
   The seed's first version normalized against the best candidate and then
   floored at a share of the best, which the best clears by construction:
   a query about tide tables and container tonnage retrieved a whole
   fantasy library, hidden Canon included.
2. Ranking, among the admitted only: each path normalized against its best
   admitted value, `max + AGREEMENT × min`, times the kind's weight.
   Always-included candidates go first; ties go to the lower id.
3. Suppression, within a kind only: identical text, or cosine ≥
   REDUNDANT_SIMILARITY between the two vectors. Word overlap is never
   evidence of duplication: "Mara promised Aldric" and "Aldric promised
   Mara" share their words and mean the opposite.

Scores are rounded to four places before they are ordered, so an order can
be reproduced from the stored report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .admission import admit
from .records import Candidate, Decision, Ranked, Term
from .scoring import order_key, path_tops, scores
from .shortlist import shortlist

__all__ = ["REDUNDANT_SIMILARITY", "cosine", "rank", "shortlist"]

#: Two texts this close say the same thing (measured for the memory bank:
#: redundant pairs 0.938-0.996, distinct ones up to 0.906).
REDUNDANT_SIMILARITY = 0.93


def rank(
    candidates: Sequence[Candidate],
    terms: Sequence[Term],
    *,
    floor: float | None,
    limit: int | None = None,
    confirm_pairs: bool = False,
) -> Ranked:
    """Admits, ranks and deduplicates `candidates` for a query of `terms`.

    1. Admit each on its own signals (`admission.admit`); with `confirm_pairs` (a
       model that reads meaning: endpoints.calibration.confirms_pairs), a
       lexical admission on two words needs its cosine at the floor.
    2. Score the offered among themselves (`_scored`) and order them.
    3. Suppress near-duplicates within a kind; cut to `limit`.
    4. Explain every found candidate, the admitted first.
    """
    admitted = [admit(c, terms, floor, confirm_pairs) for c in candidates]
    scored = sorted(_scored(admitted), key=lambda d: order_key(d.candidate, d.score))
    kept, suppressed = _suppress(scored)
    kept = [replace(d, rank=i) for i, d in enumerate(kept, 1)]
    offered, beyond = (kept, []) if limit is None else (kept[:limit], kept[limit:])
    beyond = [replace(d, rank=None, why=f"{d.why}; ranked below the first {limit}") for d in beyond]
    final = {d.candidate.id: d for d in (*offered, *suppressed, *beyond)}
    decisions = [final.get(d.candidate.id, d) for d in admitted if d.candidate.found]
    decisions.sort(key=_explained_order)
    return Ranked(tuple(offered), tuple(suppressed), tuple(beyond), tuple(decisions))


def _explained_order(decision: Decision) -> tuple:
    """The admitted in rank order (the suppressed and those past the limit
    after them), then the rest by lexical score, the strongest first. An
    always-included candidate the rule refused is listed with the refused,
    whatever its rank."""
    rank = (decision.rank or 10**9) if decision.admitted else 10**9
    return (not decision.admitted, rank, -(decision.raw_lexical or 0))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two vectors; 0 when either is all zeros."""
    norms = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    return float(np.dot(a, b)) / norms if norms else 0.0


def _scored(decisions: list[Decision]) -> list[Decision]:
    """The offered decisions with their scores (`scoring.scores`)."""
    offered = [d for d in decisions if d.offered]
    tops = path_tops((d.candidate, d.paths) for d in offered)
    scored = []
    for d in offered:
        lex, sem, relevance, score = scores(d.candidate, d.paths, tops)
        scored.append(replace(d, lexical=lex, semantic=sem, relevance=relevance, score=score))
    return scored


def _suppress(ranked: list[Decision]) -> tuple[list[Decision], list[Decision]]:
    """Sets aside candidates that repeat a higher-ranked one of the same
    kind: identical text, or cosine ≥ REDUNDANT_SIMILARITY when both have
    vectors. Wording overlap is not used (see the module's rules)."""
    kept: list[Decision] = []
    suppressed: list[Decision] = []
    texts: dict[tuple[str, str], int | str] = {}
    for decision in ranked:
        candidate = decision.candidate
        same_text = (candidate.kind, candidate.text.strip())
        duplicate = _duplicate(candidate, texts.get(same_text), kept)
        if duplicate is None:
            texts.setdefault(same_text, candidate.id)
            kept.append(decision)
        else:
            duplicate_of, how = duplicate
            suppressed.append(replace(decision, duplicate_of=duplicate_of, why=f"{decision.why}; {how}"))
    return kept, suppressed


def _duplicate(
    candidate: Candidate, same_text_as: int | str | None, kept: list[Decision]
) -> tuple[int | str, str] | None:
    """What a candidate repeats, and how, or None."""
    if same_text_as is not None:
        return same_text_as, f"suppressed: the same text as #{same_text_as}"
    if candidate.vector is None:
        return None
    for other in kept:
        if other.candidate.kind != candidate.kind or other.candidate.vector is None:
            continue
        similarity = cosine(candidate.vector, other.candidate.vector)
        if similarity >= REDUNDANT_SIMILARITY:
            return other.candidate.id, f"suppressed: a near-duplicate of #{other.candidate.id} (cosine {similarity:.3f})"
    return None
