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
against the query text with the `regex` module and a time limit, since a
reader's pattern runs on the server every turn.

Pure: no Django, no database.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import regex

from .query.vocabulary import STOPWORDS, stem

#: How long one regex key may search one query, in seconds. The query text is
#: a few thousand characters; a pattern that needs longer is backtracking.
REGEX_TIMEOUT = 0.05
#: How long all of a turn's regex keys may search together: a library of
#: backtracking patterns costs its owner's turns a quarter second, never the
#: shared worker a second per pattern. Keys past it are not tried.
REGEX_BUDGET = 0.25
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

    @classmethod
    def of(cls, text: str) -> Scene:
        stems = tuple(stem(w) for w in _WORD.findall(text.lower()))
        at: dict[str, list[int]] = {}
        for i, key in enumerate(stems):
            at.setdefault(key, []).append(i)
        return cls(
            text=text, lowered=text.lower(), stems=stems, at=at, regex_deadline=time.monotonic() + REGEX_BUDGET
        )


def match(entries: Iterable[EntryKeys], text: str, standing: frozenset[str]) -> dict[int, KeyMatch]:
    """The entries whose keys the scene names, by entry id (entries it does
    not name are left out). `standing` is the standing entities' word stems."""
    scene = Scene.of(text)
    found = {}
    for entry in entries:
        result = _match_entry(entry, scene, standing)
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


def _names_plain(key: str, scene: Scene, entry: EntryKeys) -> bool:
    if entry.substring:
        return (key in scene.text) if entry.case_sensitive else (key.lower() in scene.lowered)
    if entry.case_sensitive:
        return regex.search(rf"(?<!\w){regex.escape(key)}(?!\w)", scene.text) is not None
    wanted = [stem(w) for w in _WORD.findall(key.lower())]
    if not wanted:
        return False
    for start in scene.at.get(wanted[0], ()):
        if list(scene.stems[start:start + len(wanted)]) == wanted:
            return True
    return False


def _named_by_pattern(key: str, scene: Scene) -> bool:
    pattern = compiled(key)
    left = scene.regex_deadline - time.monotonic()
    if pattern is None or left <= 0:
        return False
    try:
        return pattern.search(scene.text, timeout=min(REGEX_TIMEOUT, left)) is not None
    except TimeoutError:
        return False


@lru_cache(maxsize=4096)
def compiled(key: str):
    """A `/pattern/flags` key compiled (JavaScript's flags: i, m, s; g, u
    and y change nothing for a yes-or-no search), or None when it is not a
    pattern `regex` can compile."""
    end = key.rfind("/")
    body, flags = key[1:end], key[end + 1:]
    options = regex.V0
    options |= regex.IGNORECASE if "i" in flags else 0
    options |= regex.MULTILINE if "m" in flags else 0
    options |= regex.DOTALL if "s" in flags else 0
    try:
        return regex.compile(body, options)
    except (regex.error, ValueError, OverflowError, RecursionError):
        return None


def pattern_problem(key: str) -> str:
    """Why a regex key cannot be used, in words; "" when it can."""
    if compiled(key) is not None:
        return ""
    try:
        regex.compile(key[1:key.rfind("/")])
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        return f"the pattern {key} is not a regular expression Loremaster can read ({exc})"
    return f"the pattern {key} is not a regular expression Loremaster can read"


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
    if key.startswith("/") and compiled(key) is not None:
        return _named_by_pattern(key, scene)
    return _names_plain(key, scene, entry)

