"""The retrieval core: admission, ranking, near-duplicate suppression, and
why, for lore passages and story memories alike (DESIGN.md §5).

Pure: plain records in, plain records out. It imports nothing of Django,
of the ORM or of the rest of `knowledge`; `knowledge.retrieval` loads
passages and hands them over, and the memory retrieval does the same with
memories. Two contracts in `.importlinter` keep it so. It sits below
`knowledge.query` (which owns words and stems, and calls `lexical_verdict`
for its own `lexical_admits`), so the rule is stated here alone.

## The API

    rank(candidates: Sequence[Candidate], terms: Sequence[Term], *,
         floor: float | None, limit: int | None = None) -> Ranked
    lexical_verdict(matched: Iterable[int], terms: Sequence[Term]) -> Verdict
    cosine(a: np.ndarray, b: np.ndarray) -> float

* `Term` is one query term as admission weighs it: its word, stem, share of
  the query, English frequency rank, whether it names a standing entity and
  whether it is distinctive in this library. `knowledge.query.weigh_terms`
  builds them from an assembled `Query`; that module owns words, this one
  owns what they are worth.
* `Candidate` is one thing that might be shown: an id, a `kind` (its class
  weight and its suppression group: `canon`/`reference`/`inspiration` for a
  passage, `recorded`/`inferred` for a memory), its text, the query term
  indexes the lexical path matched and its raw lexical score (None when that
  path did not find it), its cosine with the query (None without
  embeddings), the term indexes its text shares with the query (for the
  standing-names rule), its vector (for suppression), whether it is
  always included, and for a lorebook entry the keys the scene names
  (`keys`, or `key_refusal` saying why the named keys do not count:
  knowledge.keys judges them).
* `Decision` is the one decision type: admitted or not, by what (`key`,
  `lexical`, `semantic`, `both`, or `always` for an always-included passage
  the rule did not admit), the normalized scores, relevance, score, rank,
  `duplicate_of`, and `why` in words.
* `Ranked` holds the offered decisions in rank order, the suppressed ones,
  those past `limit`, and one decision per candidate a search path found.

A memory, which has no lexical index, gets its matched terms from
`knowledge.query.matched_terms` (the same stems lore matching confirms
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
   admits nothing (another model's floor is never borrowed). By key: a
   lorebook entry whose key the scene names is admitted on that alone (its
   author's own trigger; knowledge.keys refuses standing entities' and
   common words' keys). A candidate
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
   admitted value, `max + AGREEMENT × min`, times the kind's weight. A key
   counts 1, so entries the scene names by key come first, in the order of
   their other evidence.
   Always-included candidates go first; ties go to the lower id.
3. Suppression, within a kind only: identical text, or cosine ≥
   REDUNDANT_SIMILARITY between the two vectors. Word overlap is never
   evidence of duplication: "Mara promised Aldric" and "Aldric promised
   Mara" share their words and mean the opposite.

Scores are rounded to four places before they are ordered, so an order can
be reproduced from the stored report.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from contextbuild.records import CANON, INFERRED, INSPIRATION, RECORDED, REFERENCE

#: Lexical admission: this many distinct meaningful terms admit a candidate.
LEXICAL_MIN_SIGNALS = 2
#: Words that are a single cl100k token ranked below this are everyday
#: English: they help rank, they never admit. Measured on three hand-written
#: libraries and nineteen scenes: 10,000 got 14 right (ordinary prose still
#: admitted off-topic passages), 30,000 got 15 (more scene words, such as
#: "lens" and "tower", stopped counting), 15,000 got 18.
COMMON_WORD_RANK = 15000
#: Of the two meaningful terms that admit a candidate, one must be rarer than
#: this (or not a single token): two middling words ("hang", "pocket") are
#: still chance in a page of prose, as a laundry scene showed by admitting a
#: hidden file about a hanging. Every needed passage of the evaluation scenes
#: held a word that is not a single token at all.
RARE_WORD_RANK = 30000
#: A single term admits a candidate on its own only if it is meaningful, is
#: at least this long, and carries at least this share of the query's term
#: occurrences: in practice a short query (a new campaign whose state names
#: only a place) or a word the scene is about, never one word among sixty (a
#: "tide" in a query about tide tables and container tonnage).
LEXICAL_SINGLE_TERM_SHARE = 0.15
LEXICAL_SINGLE_TERM_LENGTH = 4
#: How much agreement between the two paths is worth when ordering survivors.
AGREEMENT = 0.15
#: Authority orders what matched; it never rescues what did not. Lore:
#: Canon > Reference > Inspiration. Memories: a recorded one is accepted
#: state and an inferred one the model's reading of a turn, the same step
#: as Canon to Reference (chosen, not measured).
WEIGHTS = {CANON: 1.0, REFERENCE: 0.85, INSPIRATION: 0.7, RECORDED: 1.0, INFERRED: 0.85}
#: The weight of a kind WEIGHTS does not name.
OTHER_WEIGHT = 0.5
#: Two texts this close say the same thing (measured for the memory bank:
#: redundant pairs 0.938-0.996, distinct ones up to 0.906).
REDUNDANT_SIMILARITY = 0.93

LEXICAL = "lexical"
SEMANTIC = "semantic"
BOTH = "both"
KEY = "key"
ALWAYS = "always"


@dataclass(frozen=True)
class Term:
    """One query term as admission weighs it (knowledge.query.weigh_terms).

    `frequency_rank` is the commoner of the word's and its stem's English
    rank (knowledge.query.word_rank), so an inflection is exactly as common
    as its word; `distinctive` is False for a word common in this library,
    `broad` True for one in a broad share of its passages (a generic pair is
    two broad words)
    (knowledge.termstats).
    """

    word: str
    key: str
    share: float
    frequency_rank: int
    standing: bool = False
    distinctive: bool = True
    broad: bool = False


@dataclass(frozen=True)
class Candidate:
    """One passage or memory that might be shown, as plain values.

    `lexical` is None when the lexical path did not find it, `cosine` when
    the semantic path did not. `withdrawn` is a reason it cannot be offered
    whatever the rule says (its source was disabled between the search and
    the load); it still gets a decision. Ids are unique within one `rank`
    call and of one type, since ties are broken on them.
    """

    id: int | str
    kind: str
    text: str
    matched: frozenset[int] = frozenset()
    lexical: float | None = None
    cosine: float | None = None
    shared: frozenset[int] = frozenset()
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)
    #: Why it is a hub, close to almost any scene in embedding space
    #: (knowledge.hubs): it is then admitted by meaning only when its words
    #: agree. "" for an ordinary passage.
    hub: str = ""
    always: bool = False
    withdrawn: str = ""
    keys: tuple[str, ...] = ()
    key_refusal: str = ""

    @property
    def found(self) -> bool:
        """Found by a search path, as opposed to only always included."""
        return self.lexical is not None or self.cosine is not None or self.named_by_key

    @property
    def named_by_key(self) -> bool:
        return bool(self.keys or self.key_refusal)


@dataclass(frozen=True)
class Verdict:
    """One path's answer for one candidate, and why, in words."""

    admitted: bool
    why: str


@dataclass(frozen=True)
class Decision:
    """What became of one candidate. `lexical` and `semantic` are the
    normalized scores (0 for a path that did not admit it); `raw_lexical`
    and `cosine` are what the paths measured, rounded for the report."""

    candidate: Candidate
    admitted: bool
    by: str
    why: str
    matched_terms: tuple[str, ...] = ()
    lexical: float = 0.0
    semantic: float = 0.0
    relevance: float = 0.0
    score: float = 0.0
    rank: int | None = None
    duplicate_of: int | str | None = None
    #: The paths that admitted it (KEY, LEXICAL, SEMANTIC).
    paths: tuple[str, ...] = ()

    @property
    def offered(self) -> bool:
        return (self.admitted or self.candidate.always) and not self.candidate.withdrawn

    @property
    def raw_lexical(self) -> float | None:
        return _rounded(self.candidate.lexical)

    @property
    def cosine(self) -> float | None:
        return _rounded(self.candidate.cosine)


@dataclass(frozen=True)
class Ranked:
    """`offered` in rank order, then what suppression and `limit` set
    aside, and `decisions`: one per found candidate, the admitted first in
    rank order (for the `retrieve` command and the inspector's rejections)."""

    offered: tuple[Decision, ...] = ()
    suppressed: tuple[Decision, ...] = ()
    beyond_limit: tuple[Decision, ...] = ()
    decisions: tuple[Decision, ...] = ()

    @property
    def considered(self) -> int:
        """How many were ranked: offered, suppressed and past the limit."""
        return len(self.offered) + len(self.suppressed) + len(self.beyond_limit)

    @property
    def rejected(self) -> int:
        return sum(not d.admitted for d in self.decisions)


def rank(
    candidates: Sequence[Candidate],
    terms: Sequence[Term],
    *,
    floor: float | None,
    limit: int | None = None,
    confirm_pairs: bool = False,
) -> Ranked:
    """Admits, ranks and deduplicates `candidates` for a query of `terms`.

    1. Admit each on its own signals (`_admit`); with `confirm_pairs` (a
       model that reads meaning: endpoints.calibration.confirms_pairs), a
       lexical admission on two words needs its cosine at the floor.
    2. Score the offered among themselves (`_scored`) and order them.
    3. Suppress near-duplicates within a kind; cut to `limit`.
    4. Explain every found candidate, the admitted first.
    """
    admitted = [_admit(c, terms, floor, confirm_pairs) for c in candidates]
    scored = sorted(_scored(admitted), key=lambda d: (not d.candidate.always, -d.score, d.candidate.id))
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


def lexical_verdict(matched: Iterable[int], terms: Sequence[Term]) -> Verdict:
    """Whether the terms a candidate matched are enough to admit it.

    Absolute: it looks at this candidate's terms, the query and the
    library's word counts, never at the other candidates. Standing entities
    never count, however many of them match: the cast is in every query.
    Nor do everyday words or words common in this library: a sixty-term
    query of ordinary prose shares a few of them with most passages of any
    library, which is how a bakery scene retrieved a whole harbour city's
    lore.
    """
    meaningful, common, standing = _sorted_evidence(matched, terms)
    admitted, reason = _lexical_rule(meaningful)
    if admitted:
        return Verdict(True, "admitted on " + ", ".join(sorted(t.word for t in meaningful)))
    parts = [reason] if reason else []
    if common:
        parts.append("common words, which never admit (" + ", ".join(common) + ")")
    if standing:
        parts.append("standing entities, which never admit (" + ", ".join(standing) + ")")
    return Verdict(False, "; ".join(parts) or "no query term matched")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two vectors; 0 when either is all zeros."""
    norms = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    return float(np.dot(a, b)) / norms if norms else 0.0


def _sorted_evidence(matched: Iterable[int], terms: Sequence[Term]) -> tuple[list[Term], list[str], list[str]]:
    """The matched terms sorted into meaningful ones (one per stem), common
    words (everyday English, or common in this library) and standing
    entities, in query order; indexes outside the query are ignored."""
    meaningful: dict[str, Term] = {}
    common: list[str] = []
    standing: list[str] = []
    for index in sorted(set(matched)):
        if not 0 <= index < len(terms):
            continue
        term = terms[index]
        if term.standing:
            standing.append(term.word)
        elif term.frequency_rank < COMMON_WORD_RANK or not term.distinctive:
            common.append(term.word)
        else:
            meaningful.setdefault(term.key, term)
    return list(meaningful.values()), common, standing


def _lexical_rule(meaningful: list[Term]) -> tuple[bool, str]:
    """The lexical rule over the meaningful terms: admitted, or the reason not."""
    if len(meaningful) >= LEXICAL_MIN_SIGNALS:
        held = ", ".join(sorted(t.word for t in meaningful))
        if not any(t.frequency_rank >= RARE_WORD_RANK for t in meaningful):
            return False, f"meaningful terms ({held}) of which none is a rare word"
        if len(meaningful) == LEXICAL_MIN_SIGNALS and all(t.broad for t in meaningful):
            return False, f"a generic pair ({held}): both words are in many of this library's passages"
        return True, ""
    if not meaningful:
        return False, ""
    [term] = meaningful
    if len(term.word) < LEXICAL_SINGLE_TERM_LENGTH:
        return False, f"one meaningful term ({term.word}), too short to admit alone"
    if term.share < LEXICAL_SINGLE_TERM_SHARE:
        share = f"{LEXICAL_SINGLE_TERM_SHARE:.0%}"
        return False, f"one meaningful term ({term.word}), which alone must carry {share} of the query"
    return True, ""


def _semantic_verdict(candidate: Candidate, floor: float | None) -> Verdict:
    """Cosine against the calibrated floor, and the standing-names refusal."""
    shown = f"cosine {_rounded(candidate.cosine):.3f}"
    if floor is None:
        return Verdict(False, f"{shown}, but this embedding model has no calibrated floor")
    if candidate.cosine < floor:
        return Verdict(False, f"{shown} below the floor {floor:.3f}")
    return Verdict(True, f"{shown} at or above the floor {floor:.3f}")


def _standing_only(candidate: Candidate, terms: Sequence[Term]) -> list[str]:
    """The standing-entity words a candidate shares with the query, when
    besides them it shares only common words; [] when it shares a
    meaningful term, or no standing entity (a match by meaning alone, which
    is what the semantic path is for). A hidden file about the protagonist
    scored 0.45-0.47 with all-MiniLM-L6-v2 against a scene that only named
    her and shared "black" and "holds" with it."""
    meaningful, _, standing = _sorted_evidence(candidate.shared, terms)
    return [] if meaningful else standing


def _admit(candidate: Candidate, terms: Sequence[Term], floor: float | None, confirm_pairs: bool = False) -> Decision:
    """The admission half of a decision: each path's verdict, then the
    refusals that override them (standing names only; withdrawn)."""
    lexical = lexical_verdict(candidate.matched, terms) if candidate.lexical is not None else None
    semantic = _semantic_verdict(candidate, floor) if candidate.cosine is not None else None
    key = _key_verdict(candidate) if candidate.named_by_key else None
    if confirm_pairs and lexical and lexical.admitted and floor is not None and candidate.cosine is not None:
        lexical = _vetoed(lexical, candidate, terms, floor)
    if semantic and semantic.admitted and not (lexical and lexical.admitted) and not (key and key.admitted):
        names = _standing_only(candidate, terms)
        if candidate.hub:
            # Near everything in embedding space, so its cosine says nothing
            # about this scene; its words must say it (knowledge.hubs).
            semantic = Verdict(
                False, f"{semantic.why}, but it is a hub ({candidate.hub}): meaning admits it only when its words do too"
            )
        elif names:
            # The cast is in every query, so a similarity carried by their
            # names says nothing about the scene: the lexical rule's
            # reasoning, applied to the words the two texts share.
            semantic = Verdict(False, "shares only standing entities with the query (" + ", ".join(names) + ")")
    paths = [(KEY, key), (LEXICAL, lexical), (SEMANTIC, semantic)]
    by = [name for name, verdict in paths if verdict and verdict.admitted]
    reasons = [f"{name}: {verdict.why}" for name, verdict in paths if verdict]
    if candidate.withdrawn:
        reasons.append(candidate.withdrawn)
    admitted = bool(by) and not candidate.withdrawn
    if not candidate.found:
        reasons.append("always included")
    return Decision(
        candidate=candidate,
        admitted=admitted,
        by=_by(by) if admitted else (ALWAYS if candidate.always else ""),
        why="; ".join(reasons),
        matched_terms=_matched_words(candidate, terms),
        paths=tuple(by) if admitted else (),
    )


def _vetoed(lexical: Verdict, candidate: Candidate, terms: Sequence[Term], floor: float) -> Verdict:
    """A lexical admission on just LEXICAL_MIN_SIGNALS meaningful words
    stands only if its meaning agrees (cosine at the floor): two words in
    common with a 600-token scene are chance as often as not. With two worlds
    in one library (a harbour city, a deep-sea station), pairs such as
    "aboard" + "cargo" or "hull" + "flood" admitted the one's lore into the
    other's scenes at cosines 0.15-0.38 against a floor of 0.39
    (all-MiniLM-L6-v2); the library's word counts could not tell them from
    needed pairs ("cistern" + "ebb": 2 and 7 of 48 passages; "aboard" +
    "sinks": 3 and 1). One word that carries the query, and three or more,
    stand on their own."""
    meaningful, _, _ = _sorted_evidence(candidate.matched, terms)
    if len(meaningful) != LEXICAL_MIN_SIGNALS or candidate.cosine >= floor:
        return lexical
    return Verdict(
        False,
        f"{lexical.why}, but its meaning does not confirm so few words (cosine {candidate.cosine:.3f} "
        f"below the floor {floor:.3f})",
    )


def _by(paths: list[str]) -> str:
    """The one word the report gives: a key outranks the other paths' evidence."""
    if KEY in paths:
        return KEY
    return BOTH if len(paths) == 2 else paths[0]


def _key_verdict(candidate: Candidate) -> Verdict:
    if candidate.keys:
        return Verdict(True, "the scene names its key " + ", ".join(f"“{k}”" for k in candidate.keys))
    return Verdict(False, candidate.key_refusal)


def _matched_words(candidate: Candidate, terms: Sequence[Term]) -> tuple[str, ...]:
    """The keys the scene names, then the query terms the lexical path matched."""
    words = () if candidate.lexical is None else sorted(terms[i].word for i in candidate.matched if 0 <= i < len(terms))
    return (*candidate.keys, *(w for w in words if w not in candidate.keys))


def _scored(decisions: list[Decision]) -> list[Decision]:
    """The offered decisions with their scores. Each path is normalized
    against its best *admitted* value (bm25 and ts_rank have no fixed range,
    and cosine's zero is not zero); `max + AGREEMENT × min`, so a candidate
    found by one path is not thereby worse and agreement breaks ties; then
    the kind's weight."""
    offered = [d for d in decisions if d.offered]
    lexical_top = max((d.candidate.lexical for d in offered if LEXICAL in d.paths), default=0.0)
    semantic_top = max((d.candidate.cosine for d in offered if SEMANTIC in d.paths), default=0.0)
    scored = []
    for d in offered:
        lex = _normalized(d.candidate.lexical, lexical_top) if LEXICAL in d.paths else 0.0
        sem = _normalized(d.candidate.cosine, semantic_top) if SEMANTIC in d.paths else 0.0
        if KEY in d.paths:
            relevance = 1.0 + AGREEMENT * max(lex, sem)
        else:
            relevance = max(lex, sem) + AGREEMENT * min(lex, sem)
        weight = WEIGHTS.get(d.candidate.kind, OTHER_WEIGHT)
        scored.append(
            replace(
                d, lexical=round(lex, 4), semantic=round(sem, 4),
                relevance=round(relevance, 4), score=round(relevance * weight, 4),
            )
        )
    return scored


def _normalized(value: float, top: float) -> float:
    return value / top if top > 0 else 0.0


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


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
