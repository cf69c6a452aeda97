"""Admission (rule 1 of knowledge.ranking): each candidate on its own
signals, by its words and by its meaning, and the refusals that
override them. Nothing here compares a candidate with the others."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .records import ALWAYS, BOTH, LEXICAL, SEMANTIC, Candidate, Decision, Term, Verdict, rounded

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
    shown = f"cosine {rounded(candidate.cosine):.3f}"
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


def admit(candidate: Candidate, terms: Sequence[Term], floor: float | None, confirm_pairs: bool = False) -> Decision:
    """The admission half of a decision: each path's verdict, then the
    refusals that override them (standing names only; withdrawn)."""
    lexical = lexical_verdict(candidate.matched, terms) if candidate.lexical is not None else None
    semantic = _semantic_verdict(candidate, floor) if candidate.cosine is not None else None
    if confirm_pairs and lexical and lexical.admitted and floor is not None and candidate.cosine is not None:
        lexical = _vetoed(lexical, candidate, terms, floor)
    if semantic and semantic.admitted and not (lexical and lexical.admitted):
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
    paths = [(LEXICAL, lexical), (SEMANTIC, semantic)]
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
    """The one word the report gives."""
    return BOTH if len(paths) == 2 else paths[0]


def _matched_words(candidate: Candidate, terms: Sequence[Term]) -> tuple[str, ...]:
    """The query terms the lexical path matched."""
    if candidate.lexical is None:
        return ()
    return tuple(sorted(terms[i].word for i in candidate.matched if 0 <= i < len(terms)))
