"""The plain values `contextbuild` exchanges with the rest of Loremaster.

`storyapp` and `knowledge` load rows and hand them over as these frozen
records; nothing here knows about the ORM. Keeping the inputs immutable is what
makes a turn's prompt a function of its inputs alone, so the budget arithmetic
can be tested without a database and a stored snapshot can be trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worldinfo.records import Result as WorldInfoResult

CANON = "canon"
REFERENCE = "reference"
INSPIRATION = "inspiration"
VISIBLE = "visible"
HIDDEN = "hidden"
INFERRED = "inferred"
RECORDED = "recorded"


@dataclass(frozen=True)
class Persona:
    name: str = ""
    pronouns: str = ""
    description: str = ""


@dataclass(frozen=True)
class Seat:
    """One character at a shared story's table: a player's seat, or the
    game master's persona (`game_master`)."""

    name: str
    description: str = ""
    game_master: bool = False


@dataclass(frozen=True)
class Campaign:
    """The reader-authored configuration a prompt is built from.

    An empty `narrator_prompt` means the default narrator rules, so a campaign
    that never overrode them picks up improvements to the default.
    """

    title: str = ""
    narrator_prompt: str = ""
    ai_instructions: str = ""
    plot_essentials: str = ""
    authors_note: str = ""
    persona: Persona = Persona()
    narration_length: str = ""
    canon_rules: tuple[str, ...] = ()
    forbidden_status_changes: tuple[tuple[str, str], ...] = ()
    #: Who is present in a shared story (empty for a lone reader's).
    cast: tuple[Seat, ...] = ()
    #: The game master's direction to the narrator, seen by no player.
    director_note: str = ""


@dataclass(frozen=True)
class ModelSettings:
    model: str = ""
    api_mode: str = "chat"
    temperature: float = 0.8
    max_output_tokens: int = 600
    #: The reply length the profile and campaign asked for, before a small window shortened it.
    configured_max_output_tokens: int | None = None
    context_token_budget: int = 8192
    #: The instruct template completions mode renders in (contextbuild.instruct).
    instruct_template: str = "plain"
    #: Tokens a reasoning model may think for beyond the reply (room kept in the window).
    reasoning_reserve: int = 0
    #: Sampler settings in force (the profile's with the campaign's on top), by our names.
    samplers: dict = field(default_factory=dict)


@dataclass(frozen=True)
class HistoryAction:
    """One lineage action as prose (the state block is stripped before storage).

    `tokens` may carry a count the caller already stored, so a long story is
    not re-tokenized on every turn.
    """

    id: int | str
    kind: str
    text: str
    tokens: int | None = None


@dataclass(frozen=True)
class Summary:
    """The story so far, as summarized up to `covers_through` on this lineage;
    `parts` are the stored segments it joins (see contextbuild.summaries)."""

    text: str
    covers_through: int | str | None
    covers_actions: int = 0
    parts: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Memory:
    """A remembered fact of this lineage: `recorded` from accepted state
    events, `inferred` from a summary; `admitted_by` says how retrieval let
    it in (lexical, semantic, both)."""

    text: str
    authority: str
    score: float = 0.0
    source_action: int | str | None = None
    id: int | str | None = None
    admitted_by: str = ""


@dataclass(frozen=True)
class Window:
    """What the inference server was found to accept.

    Probing the server is a network call, so it happens before the builder and
    arrives here as data. Only a verified window caps the budget; an
    unverified one is recorded so a turn built blind is identifiable later.
    """

    verified: bool
    tokens: int | None
    source: str
    model_max: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class KnowledgeCandidate:
    """One imported passage offered by retrieval, with every score it earned."""

    chunk_id: int | str
    source_id: int | str
    title: str
    filename: str
    classification: str
    visibility: str
    chunk_index: int
    heading_path: str
    text: str
    token_count: int = 0
    always_include: bool = False
    lexical: float = 0.0
    semantic: float = 0.0
    cosine: float | None = None
    matched_terms: tuple[str, ...] = ()
    admitted_by: str = ""
    relevance: float = 0.0
    score: float = 0.0
    duplicate_of: int | str | None = None

    def as_record(self) -> dict:
        """The passage's identity and scores for the stored report.

        The text is left out: a used passage's record adds the text it was
        shown with, and a dropped or suppressed one was never shown.
        """
        return {
            "chunk_id": self.chunk_id,
            "source_id": self.source_id,
            "title": self.title,
            "filename": self.filename,
            "classification": self.classification,
            "visibility": self.visibility,
            "chunk_index": self.chunk_index,
            "heading_path": self.heading_path,
            "token_count": self.token_count,
            "always_include": self.always_include,
            "lexical": self.lexical,
            "semantic": self.semantic,
            "cosine": self.cosine,
            "matched_terms": list(self.matched_terms),
            "admitted_by": self.admitted_by,
            "relevance": self.relevance,
            "score": self.score,
        }


@dataclass(frozen=True)
class Rejection:
    """A passage the scene's terms found that was not admitted, and why: the
    inspector lists these, so "rejected" is never just a number."""

    title: str
    filename: str
    passage: int
    heading_path: str
    classification: str
    visibility: str
    matched_terms: tuple[str, ...]
    lexical: float | None
    cosine: float | None
    why: str

    def as_record(self) -> dict:
        return {
            "title": self.title,
            "filename": self.filename,
            "passage": self.passage,
            "heading_path": self.heading_path,
            "classification": self.classification,
            "visibility": self.visibility,
            "matched_terms": list(self.matched_terms),
            "lexical": self.lexical,
            "cosine": self.cosine,
            "why": self.why,
        }


@dataclass(frozen=True)
class KnowledgeResult:
    """Retrieval's ranked, deduplicated output, before any budget is applied."""

    candidates: tuple[KnowledgeCandidate, ...] = ()
    suppressed: tuple[KnowledgeCandidate, ...] = ()
    terms: tuple[str, ...] = ()
    #: The terms the lexical search found and ranked passages by (the rarest
    #: in the library, see knowledge.termstats); every term counts as evidence.
    rank_terms: tuple[str, ...] = ()
    considered: int = 0
    generated: int = 0
    rejected: int = 0
    semantic_floor: float = 0.0
    semantic_calibrated: bool = False
    embedding_model: str = ""
    semantic_used: bool = False
    semantic_note: str = ""
    #: The strongest rejected candidates (at most retrieval's REJECTIONS_KEPT).
    rejections: tuple[Rejection, ...] = ()
    #: Lorebook passages (chunk ids) the semantic path admitted: they are
    #: not offered here, World Info decides them (as activated by meaning).
    lore_by_meaning: tuple[int | str, ...] = ()


@dataclass(frozen=True)
class Section:
    """A labelled piece of the prompt and its token cost, counted once."""

    label: str
    text: str
    tokens: int


@dataclass(frozen=True)
class TurnInputs:
    """Everything one narrator turn is built from.

    `history` is the newest stretch of the lineage, oldest first, at least as
    long as could fit; `history_total` is how many actions the whole story
    has, a pending `player_text` included, and is reported as given.
    `player_text` is a reader input not yet stored: it becomes the newest
    action and, like the narrative state, is never dropped for room.
    """

    campaign: Campaign
    settings: ModelSettings
    history: tuple[HistoryAction, ...]
    history_total: int
    player_text: str = ""
    summary: Summary | None = None
    memories: tuple[Memory, ...] = ()
    knowledge: KnowledgeResult | None = None
    narrative_state: dict = field(default_factory=dict)
    state_refusals: tuple[str, ...] = ()
    window: Window | None = None
    derived: tuple[dict, ...] = ()
    #: The server's prompt tokens per one of ours, as last measured on this
    #: endpoint; None until the server has counted a prompt.
    token_ratio: float | None = None
    #: The first history action of the previous turn's prompt: history keeps
    #: starting there while it fits, so the prompt's prefix stays cached.
    history_anchor: int | str | None = None
    #: This turn's World Info decisions (worldinfo.engine), None when the
    #: campaign has no lorebook; `world_info_titles` names each book (the
    #: source's title, by the engine's book key) for the report.
    world_info: WorldInfoResult | None = None
    world_info_titles: dict = field(default_factory=dict)
    #: The books whose entries are for the narrator only (hidden sources).
    world_info_hidden: frozenset = frozenset()
