"""The core's decisions turned back into what the turn and the `retrieve`
command show: offered passages, rejections with their reasons, and one
report line per decision."""

from __future__ import annotations

from contextbuild.records import KnowledgeCandidate, Rejection

from ..models import KnowledgeChunk
from ..ranking.records import Decision

def passage(decision: Decision, chunk: KnowledgeChunk) -> KnowledgeCandidate:
    source = chunk.source
    return KnowledgeCandidate(
        chunk_id=chunk.pk,
        source_id=source.pk,
        title=source.title,
        filename=source.original_filename,
        classification=source.classification,
        visibility=source.visibility,
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


def rejection(decision: Decision, chunk: KnowledgeChunk) -> Rejection:
    return Rejection(
        title=chunk.source.title,
        filename=chunk.source.original_filename,
        passage=chunk.index + 1,
        heading_path=chunk.heading_path,
        classification=chunk.source.classification,
        visibility=chunk.source.visibility,
        matched_terms=decision.matched_terms,
        lexical=decision.raw_lexical,
        cosine=decision.cosine,
        why=decision.why,
    )


def line(decision: Decision, chunk: KnowledgeChunk | None) -> dict:
    """A decision as the `retrieve` command prints it."""
    candidate = decision.candidate
    line: dict = {"chunk_id": candidate.id}
    if candidate.cosine is not None:
        line["cosine"] = decision.cosine
    if candidate.lexical is not None:
        line.update(lexical=decision.raw_lexical, matched_terms=list(decision.matched_terms))
    if chunk is not None:
        line.update(
            source=chunk.source.title,
            filename=chunk.source.original_filename,
            classification=chunk.source.classification,
            visibility=chunk.source.visibility,
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
