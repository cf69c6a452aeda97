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
(`common_word`, from the tokenizer's frequency ranks) and not common in this
library (knowledge.termstats). Those still rank passages; they never admit
one. Measured on hand-written libraries of about 45 passages and realistic
scenes, ordinary narration shared two or more such words with nearly every
passage, and off-topic scenes (a bakery, a backgammon game) retrieved whole
libraries. `weigh_terms` states these facts per term; the rule that weighs
them is knowledge.ranking's, which this module calls, never the reverse.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from contextbuild.narrative import Entity, NarrativeState
from contextbuild.tokens import encoding, truncate_to_last_tokens

from .ranking.admission import COMMON_WORD_RANK, lexical_verdict
from .ranking.records import Term

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
#: The shortest word that can be a term.
MIN_TERM_LENGTH = 3
#: Terms this short are not trusted to the databases' stemmers: Porter folds
#: them onto stop words that FTS5 keeps ("ate" becomes "at", "ones" "on"), so
#: such a term "matches" nearly every passage. Their matches are checked
#: word by word (knowledge.retrieval) and they are ranked on last
#: (knowledge.termstats).
SHORT_TERM = 4

#: `word_rank` of a word that is not one token: rarer than any that is.
NOT_A_TOKEN = 1 << 30

#: Common English words, which never become terms. Postgres's English
#: configuration drops some of these and SQLite's FTS5 drops none, so the
#: list is applied here, identically, before either database sees a term.
ENGLISH_STOPWORDS = frozenset(
    """
    a about above across after afterwards again against ago all almost alone along already also
    although always am among amongst amount an and another any anybody anyhow anyone anything
    anyway anywhere are aren around as aside at away back be became because become becomes
    becoming been before beforehand behind being below beside besides between beyond both bottom
    but by call can cannot cant could couldn couldnt did didn didnt do does doesn doesnt doing
    don done dont down due during each eight either eleven else elsewhere empty enough etc even
    ever every everybody everyone everything everywhere except few fifteen fifty fill find first
    five for former formerly forty four from front full further get gets getting give given gives
    go goes going gone got had hadn hadnt has hasn hasnt have haven havent having he hed hell hence
    her here hereafter hereby herein hereupon hers herself hes him himself his how however hundred
    i id ie if ill im in inc indeed instead into is isn isnt it its itself ive just keep kept last
    latter latterly least less let lets like likely ltd made make makes many may maybe me meanwhile
    might mine more moreover most mostly move much must mustn my myself name namely neither never
    nevertheless next nine no nobody none noone nor not nothing now nowhere of off often on once
    one only onto or other others otherwise our ours ourselves out over own part per perhaps please
    put rather re really same say says see seem seemed seeming seems seen serious several shall
    shan she shed shell shes should shouldn shouldnt show side since six sixty so some somebody
    somehow someone something sometime sometimes somewhere still such take taken takes ten than
    that thats the their theirs them themselves then thence there thereafter thereby therefore
    therein theres thereupon these they theyd theyll theyre theyve thing things third this those
    though three through throughout thru thus to together too took top toward towards twelve
    twenty two un under unless until up upon us use used uses using very via was wasn wasnt way we
    wed well were weren werent weve what whatever whats when whence whenever where whereafter
    whereas whereby wherein wheres whereupon wherever whether which while whither who whoever
    whole whom whose why will with within without won wont would wouldn wouldnt yes yet you youd
    youll your youre yours yourself yourselves youve able actually ah already anyways asked ask
    asks began begin begins behold certainly clearly came come comes coming does enough especially
    eventually everything fine getting gotten guess hello hey hmm indeed inside instead kind kinds
    knew know knows known later lot lots meant mean means merely mostly nearly need needs needed
    new newer nobody nothing oh ok okay old onto outside perhaps plenty pretty quite rather ready
    right said seemed sure tell tells told thank thanks think thinks thought tried tries try trying
    want wants wanted whilst yeah yours able across almost along already among anyone around
    become before began behind being below beneath beside between beyond bring brings brought
    """.split()
)

#: Words every narration is full of whatever it is about: the second-person
#: address, speech and glance verbs, and the furniture of a turn.
NARRATIVE_FILLER = frozenset(
    """
    you your yours yourself says said say saying asks asked ask replies replied reply answer
    answers answered tells told tell look looks looked looking glance glances glanced see sees saw
    watch watches watched feel feels felt hear hears heard turn turns turned walk walks walked step
    steps stepped stand stands stood sit sits sat nod nods nodded smile smiles smiled shrug shrugs
    shrugged sigh sighs sighed voice voices moment moments little bit seems seem appear appears
    appeared begin begins began start starts started continue continues continued open opens
    opened close closes closed hand hands head eyes eye face way ways time times place thing
    things someone something anything everything nothing yes okay perhaps maybe quietly slowly
    suddenly softly again still just now then finally already almost another toward towards
    around away across inside outside behind front back left right long short good bad great
    small large big first last next same other others even also only very really much many
    action actions player narrator story scene turn chapter continue reader
    """.split()
)

STOPWORDS = ENGLISH_STOPWORDS | NARRATIVE_FILLER

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The meaningful words of `text`, lowercased, in order, repeats kept.

    Apostrophes split words ("Aldric's" gives "aldric" and "s"), and the
    leftover letter is shorter than any term, so possessives need no rule.
    """
    found = []
    for word in _WORD.findall(text.lower()):
        if len(word) < MIN_TERM_LENGTH or word.isdigit() or word in STOPWORDS:
            continue
        found.append(word)
    return found


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix-stripping key, so "harbour" and "harbours" are one term.

    Both databases stem (Porter in FTS5, Snowball in Postgres), so two
    inflections in the query would match the same passage twice and count as
    two signals. This key only has to merge the common inflections; a pair it
    misses costs at most a duplicate term.
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def passage_keys(heading_path: str, text: str) -> set[str]:
    """The word keys a passage holds, its heading trail included: what a
    term is looked up in when the database's match is not taken as read."""
    return {stem(word) for word in words(f"{heading_path} {text}")}


def terms(text: str) -> list[str]:
    """Distinct meaningful words of `text` in order of first appearance,
    one surface form per stem."""
    seen: set[str] = set()
    found = []
    for word in words(text):
        key = stem(word)
        if key not in seen:
            seen.add(key)
            found.append(word)
    return found


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
        return _WORD.sub(lambda m: "" if stem(m.group(0).lower()) in standing else m.group(0), self.text)


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


@lru_cache(maxsize=65536)
def word_rank(word: str) -> int:
    """How common `word` is in English: its cl100k token rank, or
    NOT_A_TOKEN when it is not one token. A BPE vocabulary is merged in order
    of frequency in a large general corpus, so its rank is a word-frequency
    list that is already on disk; "years", "real", "sell" rank in the low
    thousands, while "reliquary", "smugglers" or "Tillinghast" are not
    single tokens at all."""
    tokens = encoding().encode_ordinary(" " + word)
    return tokens[0] if len(tokens) == 1 else NOT_A_TOKEN


def common_word(word: str) -> bool:
    """An everyday English word: ranked below knowledge.ranking.admission.COMMON_WORD_RANK."""
    return word_rank(word) < COMMON_WORD_RANK


def weigh_terms(
    terms: Sequence[str],
    standing_groups: Sequence[frozenset[str]],
    shares: Sequence[float] | None = None,
    distinctive: Collection[int] | None = None,
    broad: Collection[int] = (),
) -> tuple[Term, ...]:
    """The query's terms as admission weighs them (knowledge.ranking.records.Term).

    A term's share defaults to 1/len(terms) when `shares` does not give it;
    without `distinctive` (the terms not common in this library,
    knowledge.termstats) every term is distinctive; `broad` are those in a
    broad share of its passages (none by default). Rare and everyday are
    judged on the commoner of the word and its stem, so an inflection
    ("hanged", "pockets") is exactly as common as the word.
    """
    standing = frozenset().union(*standing_groups)
    weighed = []
    for index, term in enumerate(terms):
        key = stem(term)
        share = shares[index] if shares is not None and index < len(shares) else 1 / len(terms)
        weighed.append(
            Term(
                word=term,
                key=key,
                share=share,
                frequency_rank=min(word_rank(term), word_rank(key)),
                standing=key in standing,
                distinctive=distinctive is None or index in distinctive,
                broad=index in broad,
            )
        )
    return tuple(weighed)


def matched_terms(terms: Sequence[str], text: str, heading_path: str = "") -> frozenset[int]:
    """The indexes of the `terms` a text holds, by this module's stems: how
    a lore passage's short-term matches are confirmed, and how a memory,
    which has no lexical index, is matched at all."""
    held = passage_keys(heading_path, text)
    return frozenset(i for i, term in enumerate(terms) if stem(term) in held)


def lexical_admits(
    matched: Iterable[int],
    terms: Sequence[str],
    standing_groups: Sequence[frozenset[str]],
    shares: Sequence[float] | None = None,
    distinctive: Collection[int] | None = None,
) -> bool:
    """Whether the query words a passage matched admit it
    (knowledge.ranking.admission.lexical_verdict), for a caller holding only words."""
    return lexical_verdict(matched, weigh_terms(terms, standing_groups, shares, distinctive)).admitted


def why_not_admitted(
    matched: Iterable[int],
    terms: Sequence[str],
    standing_groups: Sequence[frozenset[str]],
    distinctive: Collection[int] | None = None,
) -> str:
    """The words of `lexical_admits`'s answer: why the matched words do not
    admit a passage."""
    return lexical_verdict(matched, weigh_terms(terms, standing_groups, None, distinctive)).why
