"""What the World Info engine reads and what it decides, as plain records.

The engine (worldinfo.engine) is SillyTavern's World Info evaluation
(public/scripts/world-info.js, `checkWorldInfo`) ported to pure Python: it
decides which lorebook entries go into one turn's prompt and where. It is
fed everything as values: the entries of the campaign's lorebook sources,
each book's settings, the story's recent messages, the timed effects of the
lineage being continued, the seed of the probability rolls. No Django, no
database, no clock, no network (the import-linter contract
`worldinfo-pure`): the same inputs always give the same decisions, so a
turn's inspector record can be reproduced.

Field names follow SillyTavern's entry template where one exists, written
in Python's style (`exclude_recursion` for `excludeRecursion`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# world_info_position in world-info.js.
BEFORE, AFTER, AN_TOP, AN_BOTTOM, AT_DEPTH, EM_TOP, EM_BOTTOM = range(7)
POSITION_WORDS = {
    BEFORE: "before the narrator's rules",
    AFTER: "after the narrator's rules",
    AN_TOP: "top of the author's note",
    AN_BOTTOM: "bottom of the author's note",
    AT_DEPTH: "at depth",
    EM_TOP: "before the example messages",
    EM_BOTTOM: "after the example messages",
}
# world_info_logic: how secondary keys combine with the primary.
AND_ANY, NOT_ALL, NOT_ANY, AND_ALL = range(4)
# extension_prompt_roles: the role of an at-depth insertion.
SYSTEM, USER, ASSISTANT = range(3)
ROLE_NAMES = {SYSTEM: "system", USER: "user", ASSISTANT: "assistant"}
# Generation types an entry's `triggers` may name (SillyTavern's names).
NORMAL, CONTINUE, RETRY = "normal", "continue", "regenerate"


@dataclass(frozen=True)
class BookSettings:
    """One book's World Info settings (SillyTavern keeps these globally;
    Loremaster keeps them per book, in the source's metadata under
    "world_info"). Entries with None for scan depth, case sensitivity,
    whole words or group scoring take their book's value."""

    scan_depth: int = 2
    budget_percent: int = 25
    budget_cap: int = 0
    recursive: bool = False
    max_recursion_steps: int = 0
    min_activations: int = 0
    min_activations_depth_max: int = 0
    case_sensitive: bool = False
    match_whole_words: bool = False
    use_group_scoring: bool = False
    include_names: bool = True
    vectorize_all: bool = False

    @classmethod
    def from_stored(cls, stored: dict | None) -> BookSettings:
        """The settings a source's metadata holds, defaults for what it
        lacks; a value of the wrong type is the default, never an error."""
        stored = stored if isinstance(stored, dict) else {}
        values = {}
        for name, default in cls().__dict__.items():
            value = stored.get(name, default)
            if isinstance(default, bool):
                values[name] = value if isinstance(value, bool) else default
            elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                values[name] = value
            else:
                values[name] = default
        return cls(**values)

    def as_stored(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CharacterFilter:
    """SillyTavern's `characterFilter`: the entry applies only to these
    names (or, with `exclude`, never to them)."""

    names: tuple[str, ...] = ()
    exclude: bool = False


@dataclass(frozen=True)
class Entry:
    """One World Info entry as the engine applies it.

    `key` is a stable identity across turns (the source and entry ids);
    `fingerprint` changes whenever the entry is edited, and a timed effect
    recorded for another fingerprint is dropped (editing an entry resets its
    timers). `keys` and `secondary_keys` hold plain and `/regex/flags` keys
    alike, as written (macros still unfilled). `order` is SillyTavern's
    insertion order (higher is inserted closer to the end, and wins budget
    and "prioritize" ties). None in a field SillyTavern lets default to the
    book means the book's setting.
    """

    key: str
    fingerprint: str
    book: str
    title: str
    content: str
    tokens: int
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    selective: bool = True
    logic: int = AND_ANY
    constant: bool = False
    vectorized: bool = False
    enabled: bool = True
    order: int = 100
    position: int = BEFORE
    depth: int = 4
    role: int = SYSTEM
    probability: int = 100
    use_probability: bool = True
    groups: tuple[str, ...] = ()
    group_override: bool = False
    group_weight: int = 100
    use_group_scoring: bool | None = None
    sticky: int = 0
    cooldown: int = 0
    delay: int = 0
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: int = 0
    ignore_budget: bool = False
    match_persona_description: bool = False
    match_character_description: bool = False
    match_character_personality: bool = False
    match_character_depth_prompt: bool = False
    match_scenario: bool = False
    match_creator_notes: bool = False
    character_filter: CharacterFilter = CharacterFilter()
    triggers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Message:
    """One message of the story, for the scan buffer: who spoke and what."""

    name: str
    text: str


@dataclass(frozen=True)
class ScanSources:
    """The texts an entry's `match…` flags add to what it is matched
    against, in Loremaster's terms (the README says which campaign field
    stands for which of SillyTavern's)."""

    persona_description: str = ""
    character_description: str = ""
    character_personality: str = ""
    character_depth_prompt: str = ""
    scenario: str = ""
    creator_notes: str = ""
    #: Texts always scanned with the messages (an author's note marked scannable).
    injected: tuple[str, ...] = ()


@dataclass(frozen=True)
class TimedEffect:
    """A sticky or cooldown effect: from the chat length `start` to `end`
    (SillyTavern's `{hash, start, end, protected}`)."""

    fingerprint: str
    start: int
    end: int
    protected: bool = False


@dataclass(frozen=True)
class TimedState:
    """The timed effects of a lineage at one action, by entry key. Stored
    with each narration (storyapp), so every branch, undo and retry reads
    the timers of its own lineage."""

    sticky: dict[str, TimedEffect] = field(default_factory=dict)
    cooldown: dict[str, TimedEffect] = field(default_factory=dict)

    def as_stored(self) -> dict:
        return {
            kind: {key: {"fingerprint": e.fingerprint, "start": e.start, "end": e.end, "protected": e.protected}
                   for key, e in sorted(effects.items())}
            for kind, effects in (("sticky", self.sticky), ("cooldown", self.cooldown))
        }

    @classmethod
    def from_stored(cls, stored: dict | None) -> TimedState:
        """A stored state; anything malformed in it is dropped, never raised."""
        stored = stored if isinstance(stored, dict) else {}
        kinds = {}
        for kind in ("sticky", "cooldown"):
            effects = {}
            raw = stored.get(kind)
            for key, value in (raw.items() if isinstance(raw, dict) else ()):
                try:
                    effects[str(key)] = TimedEffect(
                        fingerprint=str(value["fingerprint"]), start=int(value["start"]),
                        end=int(value["end"]), protected=bool(value.get("protected", False)),
                    )
                except (KeyError, TypeError, ValueError):
                    continue
            kinds[kind] = effects
        return cls(**kinds)


#: A regex key's search, injected by the caller (knowledge's compiled
#: patterns under the turn's regex time budget): True or False, or None when
#: the key was refused or the turn's time ran out (reported, not matched).
RegexSearch = Callable[[str, str], "bool | None"]
#: The token count of a text (contextbuild.tokens.count_tokens).
Count = Callable[[str], int]


@dataclass(frozen=True)
class Inputs:
    """Everything one evaluation reads.

    `messages` are the story's messages, newest first (the reader's action
    being answered is `messages[0]`). `chat_length` is SillyTavern's
    `chat.length` at generation: the number of messages in the lineage
    before the narration being written, which timed effects count in.
    `seed` makes the probability and group-weight rolls: the caller builds
    it from the campaign, the action and the attempt. `by_meaning` holds
    the keys of vectorized entries the semantic search admitted. `names`
    are the characters for `character_filter` (the persona, the card's
    name). `macros` fills `{{user}}`, `{{char}}` and the like in keys before
    matching. `budget_tokens` is the window the budget is a share of.
    """

    entries: tuple[Entry, ...]
    books: dict[str, BookSettings]
    messages: tuple[Message, ...]
    chat_length: int
    budget_tokens: int
    seed: str
    timed: TimedState = TimedState()
    sources: ScanSources = ScanSources()
    by_meaning: frozenset[str] = frozenset()
    names: tuple[str, ...] = ()
    macros: dict[str, str] = field(default_factory=dict)
    generation: str = NORMAL


@dataclass(frozen=True)
class Decision:
    """What became of one entry this turn, for the inspector and
    `build_context --json`'s `world_info`.

    `reason` is a reader's sentence ("key “Aldric”", "constant", "sticky
    until action 12", "lost group “weather” to “Rain” (prioritized, order
    200)", "failed its 30 % roll (rolled 71)", "cooling down until action
    14", "over the World Info budget (1,024 tokens)"). `how` is a short
    code for the same (key, constant, sticky, meaning, recursion; no_key,
    secondary, probability, group, cooldown, delay, budget, filter, trigger,
    disabled, recursion_delay). `until` is the chat length at which a timed
    effect ends (sticky or cooldown) where one applies.
    """

    entry: str
    key: str
    book: str
    activated: bool
    how: str
    reason: str
    position: int
    depth: int
    role: int
    order: int
    tokens: int
    recursion_level: int = 0
    until: int | None = None


@dataclass(frozen=True)
class Insertion:
    """Activated entries' texts for one place in the prompt, in order:
    joined with a newline as SillyTavern joins them. For AT_DEPTH, one
    insertion per (depth, role), entries merged."""

    position: int
    text: str
    depth: int = 0
    role: int = SYSTEM
    entries: tuple[str, ...] = ()


@dataclass(frozen=True)
class Result:
    """One evaluation: the insertions, every decision (activated first, in
    insertion order, then the rest), the tokens used of the budget, and the
    timed state to store with the narration this prompt is for."""

    insertions: tuple[Insertion, ...]
    decisions: tuple[Decision, ...]
    budget: int
    used: int
    timed: TimedState
    scanned_depth: int = 0
    passes: int = 0
    notes: tuple[str, ...] = ()

    @property
    def activated(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.activated)

    @property
    def skipped(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if not d.activated)
