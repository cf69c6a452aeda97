"""The retrieval core's records: a query term as admission weighs it, a
candidate, one path's verdict, the decision about a candidate and the
ranked answer (the rules that fill them are knowledge.ranking's)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LEXICAL = "lexical"
SEMANTIC = "semantic"
BOTH = "both"
ALWAYS = "always"


@dataclass(frozen=True)
class Term:
    """One query term as admission weighs it (knowledge.query.weighing.weigh_terms).

    `frequency_rank` is the commoner of the word's and its stem's English
    rank (knowledge.query.vocabulary.word_rank), so an inflection is exactly as common
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

    @property
    def found(self) -> bool:
        """Found by a search path, as opposed to only always included."""
        return self.lexical is not None or self.cosine is not None


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
        return rounded(self.candidate.lexical)

    @property
    def cosine(self) -> float | None:
        return rounded(self.candidate.cosine)


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


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
