"""The core's decisions turned back into what the turn and the `retrieve`
command show: offered passages, rejections with their reasons, and one
report line per decision."""

from __future__ import annotations

from contextbuild.records import KnowledgeCandidate, Rejection

from ..ranking.records import Decision
from ..selectors import SearchablePassage

def passage(decision: Decision, chunk: SearchablePassage) -> KnowledgeCandidate:
    return KnowledgeCandidate(
        chunk_id=chunk.pk,
        source_id=chunk.source_id,
        title=chunk.title,
        filename=chunk.filename,
        classification=chunk.classification,
        visibility=chunk.visibility,
        chunk_index=chunk.index,
        heading_path=chunk.heading_path,
        text=chunk.text,
        token_count=chunk.token_count,
        always_include=decision.candidate.always,
        lexical=decision.lexical,
        semantic=decision.semantic,
        cosine=decision.cosine,
        matched_terms=decision.matched_terms,
        admitted_by=decision.by,
        relevance=decision.relevance,
        score=decision.score,
        duplicate_of=decision.duplicate_of,
    )


def rejection(decision: Decision, chunk: SearchablePassage) -> Rejection:
    return Rejection(
        title=chunk.title,
        filename=chunk.filename,
        passage=chunk.index + 1,
        heading_path=chunk.heading_path,
        classification=chunk.classification,
        visibility=chunk.visibility,
        matched_terms=decision.matched_terms,
        lexical=decision.raw_lexical,
        cosine=decision.cosine,
        why=decision.why,
    )


def line(decision: Decision, chunk: SearchablePassage | None) -> dict:
    """A decision as the `retrieve` command prints it."""
    candidate = decision.candidate
    line: dict = {"chunk_id": candidate.id}
    if candidate.cosine is not None:
        line["cosine"] = decision.cosine
    if candidate.lexical is not None:
        line.update(lexical=decision.raw_lexical, matched_terms=list(decision.matched_terms))
    if chunk is not None:
        line.update(
            source=chunk.title,
            filename=chunk.filename,
            classification=chunk.classification,
            visibility=chunk.visibility,
            passage=chunk.index + 1,
            heading_path=chunk.heading_path,
        )
    line["admitted"] = decision.admitted
    if decision.admitted:
        line.update(admitted_by=decision.by, relevance=decision.relevance, score=decision.score)
        if decision.duplicate_of is not None:
            line["suppressed_as_duplicate_of"] = decision.duplicate_of
        else:
            line["rank"] = decision.rank
    line["why"] = decision.why
    return line
