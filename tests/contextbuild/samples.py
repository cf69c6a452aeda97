"""Small builders for contextbuild's records, so each test states only what it varies."""

from dataclasses import replace

from contextbuild import (
    Campaign,
    HistoryAction,
    KnowledgeCandidate,
    KnowledgeResult,
    Memory,
    ModelSettings,
    Persona,
    Summary,
    TurnInputs,
)

STATE = {
    "scene": {"summary": "Mara waits at the quay.", "location": "Westhaven harbour"},
    "entities": {
        "aldric": {"name": "Aldric", "aliases": ["the harbourmaster"], "status": "alive"}
    },
    "threads": {
        "seal": {"title": "Return the broken seal", "status": "open"},
        "debt": {"title": "Pay the ferryman", "status": "resolved"},
    },
}

LINE = "Gulls wheel over the grey tide while the harbour bells ring for the evening watch."


def campaign(**overrides) -> Campaign:
    return replace(
        Campaign(
            title="The Salt Road",
            ai_instructions="Second person, present tense.",
            plot_essentials="Mara carries the broken seal.",
            authors_note="Keep the tone grim.",
            persona=Persona(name="Mara", pronouns="she/her", description="A smuggler."),
            narration_length="medium",
            canon_rules=("Magic always costs blood.",),
            forbidden_status_changes=(("dead", "alive"),),
        ),
        **overrides,
    )


def story(count: int, words: int = 4) -> tuple[HistoryAction, ...]:
    """`count` actions, oldest first, alternating player and narrator."""
    return tuple(
        HistoryAction(
            id=i,
            kind="player" if i % 2 == 0 else "ai",
            text=" ".join(f"Turn {i}. {LINE}" for _ in range(words)),
        )
        for i in range(count)
    )


def candidate(chunk_id, classification="canon", words=20, **overrides) -> KnowledgeCandidate:
    fields = {
        "chunk_id": chunk_id,
        "source_id": f"src-{classification}",
        "title": f"{classification.title()} notes",
        "filename": f"{classification}.md",
        "classification": classification,
        "visibility": "visible",
        "chunk_index": 0,
        "heading_path": "Westhaven > Harbour",
        "text": " ".join(f"Fact {chunk_id}-{n}." for n in range(words)),
    }
    return KnowledgeCandidate(**{**fields, **overrides})


def knowledge(*candidates, **overrides) -> KnowledgeResult:
    return KnowledgeResult(candidates=tuple(candidates), terms=("quay", "seal"), **overrides)


def turn(**overrides) -> TurnInputs:
    history = overrides.pop("history", story(40))
    return TurnInputs(
        campaign=overrides.pop("campaign", campaign()),
        settings=overrides.pop("settings", ModelSettings(model="test-model")),
        history=history,
        history_total=overrides.pop("history_total", len(history)),
        summary=overrides.pop("summary", Summary("Mara fled the capital.", 12, 13)),
        memories=overrides.pop(
            "memories",
            (Memory("Aldric owes Mara a favour.", "recorded", 0.8, 7),
             Memory("Aldric fears the sea.", "inferred", 0.6, 9)),
        ),
        narrative_state=overrides.pop("narrative_state", STATE),
        **overrides,
    )
