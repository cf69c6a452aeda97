"""The retrieval query for one turn, and what its words are worth.

Pure: plain values in, plain values out, no ORM. `storyapp` reads the story
(the narrative state at the position, the newest lineage actions, the
persona) and hands it over as `QueryInputs`; nothing here can reach an
action the reader undid and branched away from, because nothing here reads
the story's tables at all.

## The query is not the reader's sentence

"I open the door" retrieves nothing useful; the material that would help is
about the room the door is in. So the query is assembled from what is active:
the scene summary and location, the entities present (names and aliases),
the open threads, and the last few lineage actions, bounded.

## Standing entities

The protagonist and the established entities are in the query on every
turn, whatever the scene, so a passage that matched only them has said
nothing about the present moment. That is how a hidden file was admitted
into a harbour scene on the word "Aldric" (the seed's review finding M7-F1).
An entity's key, name and aliases are one *group*. Standing entities never
count towards admission, alone or beside another word: a hidden file about
the protagonist shares her name with every scene, and her name plus one
incidental word is still her name alone. A passage about the cast is admitted
on two other meaningful words, or by meaning (the semantic path). A place
that is not an entity ("Westhaven") is an ordinary, strong term.

## Meaningful words

Common English words never become terms (STOPWORDS). Of the rest, a word
only counts as evidence when it says something: not an everyday English word
(`vocabulary.common_word`, from the tokenizer's frequency ranks) and not common in this
library (knowledge.termstats). Those still rank passages; they never admit
one. Measured on hand-written libraries of about 45 passages and realistic
scenes, ordinary narration shared two or more such words with nearly every
passage, and off-topic scenes (a bakery, a backgammon game) retrieved whole
libraries. `weighing.weigh_terms` states these facts per term; the rule that weighs
them is knowledge.ranking's, which this package calls, never the reverse.

The words themselves (terms, stems, English frequency) are in `vocabulary`,
their weights in `weighing`; the assembly of a turn's query is here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from contextbuild.narrative import Entity, NarrativeState
from contextbuild.tokens import truncate_to_last_tokens

from .vocabulary import WORD, stem, terms, words

#: How many of the newest lineage actions the query reads; further back is
#: the summary's job.
QUERY_ACTIONS = 4
#: A ceiling on the story text that becomes query terms.
QUERY_TOKENS = 600
#: Entities and threads read from the state, so a large cast does not turn
#: every query into a search for everything.
STATE_ITEMS = 40
#: Aliases read per entity.
ALIASES_PER_ENTITY = 3
#: The most terms the lexical search carries (knowledge.lexical reads 64).
MAX_TERMS = 60


@dataclass(frozen=True)
class QueryInputs:
    """What `storyapp` hands knowledge for one turn, as plain values.

    `recent` is the texts of the newest lineage actions, oldest first (the
    caller reads them through the lineage, so off-lineage turns cannot be
    here); `player_text` is a reader's action not yet stored (a preview),
    which joins them as the newest. `standing` is the groups of words that are
    in the query on every turn (see `standing_groups`).
    """

    state: dict = field(default_factory=dict)
    recent: tuple[str, ...] = ()
    persona_name: str = ""
    player_text: str = ""
    standing: tuple[frozenset[str], ...] = ()

    @classmethod
    def build(
        cls, *, state: dict | None, recent: Sequence[str], persona_name: str = "", player_text: str = ""
    ) -> QueryInputs:
        state = state if isinstance(state, dict) else {}
        return cls(
            state=state,
            recent=tuple(recent),
            persona_name=persona_name,
            player_text=player_text,
            standing=standing_groups(state, persona_name),
        )


@dataclass(frozen=True)
class Query:
    """The assembled query: its text, the terms the lexical path searches,
    each term's share of the query, the standing groups admission never
    counts, and the text the semantic path embeds (`semantic_text`)."""

    text: str
    terms: tuple[str, ...]
    shares: tuple[float, ...]
    standing: tuple[frozenset[str], ...]

    @property
    def empty(self) -> bool:
        return not self.terms and not self.text.strip()

    @property
    def standing_words(self) -> frozenset[str]:
        """Every word stem of every standing group."""
        return frozenset().union(*self.standing)

    @property
    def semantic_text(self) -> str:
        """The text without the standing entities' names. They are in every
        query, so embedding them pulls every turn towards the passages about
        the cast (a hidden file about the protagonist first): on hand-written
        scenes, a query that kept the names scored the protagonist's secret
        file above the floor in scenes that only named her."""
        standing = self.standing_words
        if not standing:
            return self.text
        return WORD.sub(lambda m: "" if stem(m.group(0).lower()) in standing else m.group(0), self.text)


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def _entities(state: NarrativeState) -> tuple[Entity, ...]:
    return state.entities[:STATE_ITEMS]


def _aliases(entity: Entity) -> list[str]:
    return list(entity.aliases[:ALIASES_PER_ENTITY])


def state_text(state: dict) -> str:
    """Scene, location, entity names and aliases, open threads, as text.

    Read off the stored document (through `NarrativeState`, which checks its
    shapes) rather than the prompt's rendering of it: only the words are
    wanted. What the player character carries is left out: it is in every
    query while it is carried, so a passage about it would be admitted
    whatever the scene, as a standing entity's would.
    """
    narrative = NarrativeState.from_document(state)
    pieces = [narrative.scene.summary, narrative.scene.location]
    for entity in _entities(narrative):
        pieces.append(entity.name or entity.id.replace("_", " ").replace("-", " "))
        pieces += _aliases(entity)
    pieces += [t.title or t.id for t in narrative.threads[:STATE_ITEMS] if t.is_open]
    return "\n".join(piece for piece in pieces if piece)


def standing_groups(state: dict, persona_name: str = "") -> tuple[frozenset[str], ...]:
    """One group of word stems per standing entity: the persona, and each
    established entity's key, name and aliases together."""
    groups: list[frozenset[str]] = []
    persona = frozenset(stem(w) for w in words(persona_name or ""))
    if persona:
        groups.append(persona)
    for entity in _entities(NarrativeState.from_document(state)):
        names = [entity.id.replace("_", " ").replace("-", " "), entity.name, *_aliases(entity)]
        group = frozenset(stem(w) for name in names for w in words(name))
        if group:
            groups.append(group)
    return tuple(groups)


def assemble(inputs: QueryInputs) -> Query:
    """The query for a turn.

    1. The story: the newest actions (a pending reader action last), cut to
       the last QUERY_TOKENS tokens, so the newest words survive.
    2. Terms: state first (it names what is active), then the story from its
       newest end, one per stem, at most MAX_TERMS.
    3. Each term's share: its occurrences over all term occurrences in the
       query text.
    """
    recent = [t for t in (*inputs.recent[-QUERY_ACTIONS:], inputs.player_text) if _text(t)]
    if inputs.player_text.strip() and len(recent) > QUERY_ACTIONS:
        recent = recent[-QUERY_ACTIONS:]
    story = truncate_to_last_tokens("\n\n".join(recent), QUERY_TOKENS)
    state = state_text(inputs.state)
    text = "\n\n".join(part for part in (state, story) if part.strip())

    newest_first = "\n".join(reversed(story.split("\n\n")))
    chosen = terms(f"{state}\n{newest_first}")[:MAX_TERMS]
    counts = Counter(stem(w) for w in words(text))
    total = sum(counts.values()) or 1
    shares = tuple(counts.get(stem(t), 1) / total for t in chosen)
    return Query(text=text, terms=tuple(chosen), shares=shares, standing=inputs.standing)
