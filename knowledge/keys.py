"""Lorebook keys as evidence: which entries the scene names (issue 14).

A lorebook entry's keys are its author's own statement of when it matters:
SillyTavern, NovelAI, AI Dungeon and KoboldAI all insert an entry when a
key appears in the recent story. So a key the scene names admits the
entry's passages on its own (knowledge.ranking's `key` path), where the
words a passage merely shares with the scene need two meaningful terms.

Three rules keep keys from admitting what the other paths would refuse:

- A key made only of standing entities' words (the protagonist, the
  established cast) never admits: they are in every query, so a hidden entry
  keyed on the protagonist's name would otherwise be in every prompt.
- A key made only of common English words ("the", "there") never admits.
- SillyTavern's secondary keys are honoured as it applies them: with
  `selective` set and secondary keys present, `selectiveLogic` 0 (AND ANY)
  needs one of them in the scene too, 1 (NOT ALL) not all of them, 2 (NOT
  ANY) none, 3 (AND ALL) all. An entry they hold back is held back from
  every path (`vetoed`): its author said when it does not apply.

Plain keys are matched as whole words on this module's stems, so "dragon"
finds "dragons" and "Aldric's", never "dragonfly". A format that matches
substrings says so (KoboldAI; SillyTavern's `matchWholeWords: false`), and
`caseSensitive: true` is kept. Regex keys (`/pattern/flags`) are matched
against the query text with the `regex` module, checked before they are
compiled and compiled once per campaign (knowledge.regexkeys), within one
deadline per turn that covers compiling and searching, since a reader's
pattern runs on the server every turn. An entry whose regex key is refused
says why, for the inspector, when nothing else names it.

Pure: no Django, no database.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from .query.vocabulary import STOPWORDS, stem
from .regexkeys import OUT_OF_TIME, Patterns

#: How long one regex key may search one query, in seconds. The query text is
#: a few thousand characters; a pattern that needs longer is backtracking.
REGEX_TIMEOUT = 0.05
#: How long all of a turn's regex keys may be compiled and searched
#: together: a library of backtracking patterns costs its owner's turns a
#: quarter second, never the shared worker a second per pattern. Keys past it
#: are not tried; keys compiled before it stay compiled for the next turn.
REGEX_BUDGET = 0.25
#: Entries a turn reports as refused for their regex keys (the rest are
#: skipped quietly): enough for the inspector, never a candidate per key.
REFUSALS_REPORTED = 10
AND_ANY, NOT_ALL, NOT_ANY, AND_ALL = 0, 1, 2, 3
LOGIC_WORDS = {AND_ANY: "AND ANY", NOT_ALL: "NOT ALL", NOT_ANY: "NOT ANY", AND_ALL: "AND ALL"}

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class EntryKeys:
    """One entry's keys and how they are matched."""

    entry_id: int
    keys: tuple[str, ...] = ()
    regex_keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    selective: bool = True
    logic: int = AND_ANY
    substring: bool = False
    case_sensitive: bool = False


@dataclass(frozen=True)
class KeyMatch:
    """What the scene did to one entry's keys. `keys` are the keys that
    admit it; `why` says why named keys do not (standing entities, common
    words) or, `vetoed`, why its secondary keys hold it back."""

    entry_id: int
    keys: tuple[str, ...] = ()
    why: str = ""
    vetoed: bool = False

    @property
    def admitted(self) -> bool:
        return bool(self.keys)


@dataclass(frozen=True)
class Scene:
    """The query text read once for every key: its raw and lowered text and
    the positions of each word stem."""

    text: str
    lowered: str
    stems: tuple[str, ...]
    at: dict
    #: When the turn's regex budget runs out (time.monotonic()).
    regex_deadline: float = 0.0
    #: The campaign's compiled regex keys (a table of this turn's own when none is given).
    patterns: Patterns = field(default_factory=Patterns)
    #: Why each regex key refused this turn could not be used, by key.
    refused: dict = field(default_factory=dict)

    @classmethod
    def of(cls, text: str, patterns: Patterns | None = None) -> Scene:
        stems = tuple(stem(w) for w in _WORD.findall(text.lower()))
        at: dict[str, list[int]] = {}
        for i, key in enumerate(stems):
            at.setdefault(key, []).append(i)
        return cls(
            text=text, lowered=text.lower(), stems=stems, at=at, regex_deadline=time.monotonic() + REGEX_BUDGET,
            patterns=patterns if patterns is not None else Patterns(),
        )


def match(
    entries: Iterable[EntryKeys], text: str, standing: frozenset[str], patterns: Patterns | None = None
) -> dict[int, KeyMatch]:
    """The entries whose keys the scene names, by entry id (entries it does
    not name are left out, but for the first few whose regex keys were
    refused, with why). `standing` is the standing entities' word stems;
    `patterns` the campaign's compiled regex keys, kept between turns."""
    scene = Scene.of(text, patterns)
    found = {}
    reported = 0
    for entry in entries:
        result = _match_entry(entry, scene, standing)
        if result is None and reported < REFUSALS_REPORTED:
            result = _refusal(entry, scene)
            reported += result is not None
        if result is not None:
            found[entry.entry_id] = result
    return found


def _match_entry(entry: EntryKeys, scene: Scene, standing: frozenset[str]) -> KeyMatch | None:
    named = [k for k in entry.keys if _names_plain(k, scene, entry)]
    named += [k for k in entry.regex_keys if _named_by_pattern(k, scene)]
    if not named:
        return None
    counting = [k for k in named if not _standing_only(k, standing) and not _common_only(k)]
    if not counting:
        ruled = ["standing entities" if _standing_only(k, standing) else "only common words" for k in named]
        shown = ", ".join(f"“{k}” ({why})" for k, why in zip(named, ruled, strict=True))
        return KeyMatch(entry.entry_id, why=f"its keys named in the scene never admit: {shown}")
    refusal = _secondary_refusal(entry, scene)
    if refusal:
        return KeyMatch(entry.entry_id, why=refusal, vetoed=True)
    return KeyMatch(entry.entry_id, keys=tuple(counting))


def _refusal(entry: EntryKeys, scene: Scene) -> KeyMatch | None:
    """The entry, not admitted, with why its refused regex keys were not
    used; None when none was refused (a key not tried for lack of time is
    tried next turn, and says nothing)."""
    reasons = [scene.refused[k] for k in entry.regex_keys if k in scene.refused]
    if not reasons:
        return None
    return KeyMatch(entry.entry_id, why="its regex keys are not used: " + "; ".join(reasons))


def _names_plain(key: str, scene: Scene, entry: EntryKeys) -> bool:
    if entry.substring:
        return (key in scene.text) if entry.case_sensitive else (key.lower() in scene.lowered)
    if entry.case_sensitive:
        return _whole_word_in(key, scene.text)
    wanted = [stem(w) for w in _WORD.findall(key.lower())]
    if not wanted:
        return False
    for start in scene.at.get(wanted[0], ()):
        if list(scene.stems[start:start + len(wanted)]) == wanted:
            return True
    return False


def _whole_word_in(key: str, text: str) -> bool:
    """Whether `key` occurs in `text` with no word character either side:
    found by string search, so a case-sensitive key compiles nothing."""
    start = text.find(key)
    while start >= 0:
        if not _word_char(text, start - 1) and not _word_char(text, start + len(key)):
            return True
        start = text.find(key, start + 1)
    return False


def _word_char(text: str, at: int) -> bool:
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


def _named_by_pattern(key: str, scene: Scene) -> bool:
    """Whether the compiled key finds itself in the scene. Compiling and
    searching share the turn's deadline, checked before either; a refused
    key is remembered with its reason."""
    pattern, why = scene.patterns.get(key, scene.regex_deadline)
    if pattern is None:
        if why != OUT_OF_TIME:
            scene.refused[key] = why
        return False
    left = scene.regex_deadline - time.monotonic()
    if left <= 0:
        return False
    try:
        return pattern.search(scene.text, timeout=min(REGEX_TIMEOUT, left)) is not None
    except TimeoutError:
        return False


def _key_words(key: str) -> list[str]:
    return _WORD.findall(key.lower())


def _standing_only(key: str, standing: frozenset[str]) -> bool:
    if key.startswith("/"):
        return False
    found = [stem(w) for w in _key_words(key)]
    return bool(found) and all(w in standing for w in found)


def _common_only(key: str) -> bool:
    if key.startswith("/"):
        return False
    return all(w in STOPWORDS for w in _key_words(key))


def _secondary_refusal(entry: EntryKeys, scene: Scene) -> str:
    """Why the secondary keys hold the entry back, or "" when they do not."""
    if not entry.selective or not entry.secondary_keys:
        return ""
    present = [k for k in entry.secondary_keys if _names_secondary(k, scene, entry)]
    logic = entry.logic if entry.logic in LOGIC_WORDS else AND_ANY
    total = len(entry.secondary_keys)
    passes = {
        AND_ANY: bool(present),
        NOT_ALL: len(present) < total,
        NOT_ANY: not present,
        AND_ALL: len(present) == total,
    }[logic]
    if passes:
        return ""
    listed = ", ".join(f"“{k}”" for k in entry.secondary_keys)
    return f"its keys are named, but its secondary keys ({listed}) fail {LOGIC_WORDS[logic]}"


def _names_secondary(key: str, scene: Scene, entry: EntryKeys) -> bool:
    """A secondary key written `/…/` is a pattern when it is one Loremaster
    can use; otherwise it is matched as the text it is."""
    if key.startswith("/") and key.rfind("/") > 0:
        pattern, why = scene.patterns.get(key, scene.regex_deadline)
        if pattern is not None:
            return _named_by_pattern(key, scene)
        if why == OUT_OF_TIME:
            return False
    return _names_plain(key, scene, entry)
