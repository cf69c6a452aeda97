"""Which candidates `rank` needs in full, when there are too many to load
whole: a story's memory bank holds one per narration, and reading each
with its vector and text to offer six of them cost most of a turn's prompt.

The caller gives each candidate's signals only (its matched terms, lexical
score and cosine, no text or vector); `shortlist` admits them (rule 1),
scores them (rule 2, `scoring`) and returns the first `count` in rank order
with each path's best admitted candidate (what the scores are normalized
against). `rank` over those, loaded in full, offers what it would offer
over all of them, as far as the first `count` reach: its order is the same
on any set that holds the tops, and suppression only looks back at what
ranks higher. Where suppression sets aside so many that fewer than the
limit are left from the first `count`, the caller asks again with a
larger `count`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .admission import admit
from .records import LEXICAL, SEMANTIC, Candidate, Term
from .scoring import order_key, path_tops, scores


def shortlist(
    candidates: Sequence[Candidate], terms: Sequence[Term], *, floor: float | None, count: int,
    confirm_pairs: bool = False,
) -> tuple[tuple[Candidate, ...], bool]:
    """The first `count` admitted candidates in rank order, then each path's
    best admitted candidate if it is not among them; and whether those
    first `count` are all the admitted.

    Admission reads only a candidate's own signals, so candidates with the
    same ones share one verdict (a long story's memories often match the
    same few terms)."""
    verdicts: dict[tuple, tuple[str, ...] | None] = {}
    admitted: list[tuple[Candidate, tuple[str, ...]]] = []
    for candidate in candidates:
        signals = (
            candidate.matched, candidate.shared, candidate.lexical is None,
            None if candidate.cosine is None or floor is None else candidate.cosine >= floor,
            candidate.hub, candidate.always, candidate.withdrawn,
        )
        if signals not in verdicts:
            decision = admit(candidate, terms, floor, confirm_pairs)
            verdicts[signals] = decision.paths if decision.offered else None
        paths = verdicts[signals]
        if paths is not None:
            admitted.append((candidate, paths))
    tops = path_tops(admitted)
    ordered = sorted(admitted, key=lambda pair: order_key(pair[0], scores(pair[0], pair[1], tops)[3]))
    picked = {candidate.id: candidate for candidate, _ in ordered[:count]}
    for path, top in ((LEXICAL, tops[0]), (SEMANTIC, tops[1])):
        holders = (c for c, paths in ordered if path in paths and _signal(c, path) == top)
        holder = next(holders, None)
        if holder is not None:
            picked.setdefault(holder.id, holder)
    return tuple(picked.values()), len(ordered) <= count


def _signal(candidate: Candidate, path: str) -> float | None:
    return candidate.lexical if path == LEXICAL else candidate.cosine
