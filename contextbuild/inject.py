"""Fitting retrieved knowledge into the prompt, and saying what it cost.

Retrieval decides which passages are worth offering; this module decides how
many the prompt can afford, frames them by class, and records the provenance
the inspector shows. Four behaviours under pressure, four mechanisms:

    always-included Canon   protected: priced with the system block before any
                            history is chosen, capped at ALWAYS_SHARE of the
                            budget so one library cannot eat the window.
    retrieved Canon         first in line for the knowledge budget.
    Reference               capped at a share of it, so it cannot crowd out Canon.
    Inspiration             capped smallest, filled last, dropped first.

The retrieved classes spend KNOWLEDGE_SHARE of what is left after everything
protected and the reply reserve, so none of them can reach the narrative
state, the reader's input, the rules or the reserve. What they leave unspent
returns to the story history. Nothing is dropped silently: every passage that
did not fit is recorded with its reason and cost.

`plan` and `select` return new `Plan` values rather than filling in private
fields, so the report is read off the value the builder actually used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import rules
from .records import (
    CANON,
    HIDDEN,
    INSPIRATION,
    REFERENCE,
    KnowledgeCandidate,
    KnowledgeResult,
    Section,
)
from .tokens import count_tokens

#: A third of the elastic budget: room for several passages at the chunker's
#: size while most of the window stays with the story the reader came for.
KNOWLEDGE_SHARE = 0.33
#: What each class may take of the knowledge budget, whatever it scores.
CLASS_SHARE = {CANON: 1.00, REFERENCE: 0.50, INSPIRATION: 0.25}
#: Always-include is the one place a reader can put unbounded text into every
#: prompt; it may take this share of the whole budget and no more.
ALWAYS_SHARE = 0.20
#: Highest authority first, so the scarcest room goes to the strongest claim.
FILL_ORDER = (CANON, REFERENCE, INSPIRATION)

OVER_ALWAYS_CAP = "over the always-include cap"
OVER_KNOWLEDGE_BUDGET = "over the knowledge budget"


@dataclass(frozen=True)
class Placement:
    """A passage as rendered, its token cost, and why it was dropped ("" if used)."""

    candidate: KnowledgeCandidate
    rendered: str
    tokens: int
    reason: str = ""


@dataclass(frozen=True)
class Plan:
    """A retrieval result priced against a budget.

    `protected` holds the system-block sections (the framing rule and
    always-in-force Canon); `sections` holds the retrieved-knowledge sections
    once `select` has filled them, highest authority first.
    """

    result: KnowledgeResult
    protected: tuple[Section, ...] = ()
    sections: tuple[Section, ...] = ()
    used: tuple[Placement, ...] = ()
    dropped: tuple[Placement, ...] = ()
    budget: int = 0
    spent: int = 0

    @property
    def protected_tokens(self) -> int:
        return sum(section.tokens for section in self.protected)


def plan(result: KnowledgeResult, context_budget: int) -> Plan:
    """Prices the protected half: the framing rule and always-included Canon.

    Runs before the builder knows how much history it can afford, because the
    answer depends on this. The rule is emitted whenever any passage may be
    shown, even if only always-included Canon survives: a framed section
    without its frame is exactly what the rule exists to prevent. Always-include
    is honoured for Canon only; any other class competes like the rest.
    """
    if not result.candidates:
        return Plan(result=result)
    rule = rules.KNOWLEDGE_RULE
    if any(c.visibility == HIDDEN for c in result.candidates):
        rule = f"{rule}\n{rules.HIDDEN_RULE}"
    protected = [Section(rules.SECTION_RULE, rule, count_tokens(rule))]
    section, used, dropped, _ = _fill(
        [c for c in result.candidates if _always(c)],
        cap=max(0, int(context_budget * ALWAYS_SHARE)),
        label=rules.SECTION_ALWAYS_CANON,
        framing=rules.ALWAYS_FRAMING,
        reason=OVER_ALWAYS_CAP,
    )
    if section is not None:
        protected.append(section)
    return Plan(result=result, protected=tuple(protected), used=used, dropped=dropped)


def select(ready: Plan, available: int) -> Plan:
    """Fills the retrieved-knowledge budget out of `available`.

    Only KNOWLEDGE_SHARE of `available` is spendable; the rest belongs to the
    history. Classes fill in authority order, each against its own cap and
    what is left; within a class a passage that does not fit is skipped so a
    smaller, lower-ranked one may still. Each passage's cost includes its
    separator, and the first in a class pays for the class's framing line.
    """
    budget = max(0, int(available * KNOWLEDGE_SHARE))
    sections: list[Section] = []
    used = list(ready.used)
    dropped = list(ready.dropped)
    spent = 0
    live = [c for c in ready.result.candidates if not _always(c)]
    for classification in FILL_ORDER:
        members = [c for c in live if c.classification == classification]
        if not members:
            continue
        section, placed, missed, cost = _fill(
            members,
            cap=min(budget - spent, int(budget * CLASS_SHARE[classification])),
            label=rules.CLASS_SECTIONS[classification],
            framing=rules.CLASS_FRAMING[classification],
            reason=OVER_KNOWLEDGE_BUDGET,
        )
        if section is not None:
            sections.append(section)
        used += placed
        dropped += missed
        spent += cost
    return replace(
        ready,
        sections=tuple(sections),
        used=tuple(used),
        dropped=tuple(dropped),
        budget=budget,
        spent=spent,
    )


def render(candidate: KnowledgeCandidate) -> str:
    """One passage as the narrator sees it: a provenance line, then the text.

    The label makes a claim attributable to a file the reader imported and
    classified, and it is the same identification the inspector shows. The
    narrator-only marker sits on the passage itself, because a passage is read
    where it sits, not where a preamble was. The imported parts are
    neutralised (`rules.neutralise`, `rules.provenance_field`), so only the
    app writes a provenance line or a marker: a file cannot.
    """
    parts = [rules.provenance_field(candidate.filename or candidate.title) or "imported source"]
    heading = rules.provenance_field(candidate.heading_path)
    if heading:
        parts.append(heading)
    parts.append(f"passage {candidate.chunk_index + 1}")
    label = " · ".join(parts)
    if candidate.visibility == HIDDEN:
        label = f"{label} {rules.HIDDEN_MARKER}"
    return f"[{label}]\n{rules.neutralise(candidate.text)}"


def report(ready: Plan) -> dict:
    """The turn's knowledge record, as stored in the context snapshot.

    Used passages carry the text they were shown with, not a pointer to the
    chunk, so a turn's evidence survives its source being edited or deleted.
    """
    result = ready.result
    return {
        "used": [
            dict(
                p.candidate.as_record(),
                text=p.candidate.text,
                rendered=p.rendered,
                prompt_tokens=p.tokens,
            )
            for p in ready.used
        ],
        "dropped": [
            dict(p.candidate.as_record(), reason=p.reason, tokens=p.tokens)
            for p in ready.dropped
        ],
        "suppressed": [
            dict(c.as_record(), duplicate_of=c.duplicate_of) for c in result.suppressed
        ],
        "terms": list(result.terms),
        "rank_terms": list(result.rank_terms),
        "considered": result.considered,
        "generated": result.generated,
        "rejected": result.rejected,
        "rejections": [r.as_record() for r in result.rejections],
        "semantic_floor": result.semantic_floor,
        "semantic_calibrated": result.semantic_calibrated,
        "embedding_model": result.embedding_model,
        "semantic_used": result.semantic_used,
        "semantic_note": result.semantic_note,
        "budget": ready.budget,
        "spent": ready.spent,
        "protected_tokens": ready.protected_tokens,
    }


def _always(candidate: KnowledgeCandidate) -> bool:
    return candidate.always_include and candidate.classification == CANON


def _fill(
    candidates: list[KnowledgeCandidate],
    *,
    cap: int,
    label: str,
    framing: str,
    reason: str,
) -> tuple[Section | None, tuple[Placement, ...], tuple[Placement, ...], int]:
    """Places ranked candidates under `cap`; returns (section, used, dropped, spent).

    The section is the framing line, then the passages, a blank line apart,
    between PASSAGES_OPEN and PASSAGES_CLOSE on lines of their own. `spent`
    counts that frame and a separator after every piece, so it is what the
    section costs in the prompt including the blank line that follows it;
    the section's own tokens are that minus the last separator.
    """
    separator = count_tokens(rules.SEPARATOR)
    newline = count_tokens("\n")
    head = f"{framing}\n{rules.PASSAGES_OPEN}"
    opening = count_tokens(head) + newline + newline + count_tokens(rules.PASSAGES_CLOSE)
    used: list[Placement] = []
    dropped: list[Placement] = []
    spent = 0
    for candidate in candidates:
        rendered = render(candidate)
        tokens = count_tokens(rendered)
        cost = tokens + separator + (0 if used else opening)
        if spent + cost > cap:
            dropped.append(Placement(candidate, rendered, tokens, reason))
            continue
        used.append(Placement(candidate, rendered, tokens))
        spent += cost
    if not used:
        return None, (), tuple(dropped), 0
    passages = rules.SEPARATOR.join(p.rendered for p in used)
    text = f"{head}\n{passages}\n{rules.PASSAGES_CLOSE}"
    return Section(label, text, spent - separator), tuple(used), tuple(dropped), spent
