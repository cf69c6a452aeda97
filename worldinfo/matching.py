"""Keys against the scan text, as SillyTavern's `matchKeys` and secondary
logic decide.

A plain key is matched in the lowered text unless the entry is case
sensitive. With whole words, a key of one word must stand between the text's
edges or non-word characters (`(?:^|\\W)key(?:$|\\W)`, JavaScript's ASCII
`\\W`, hence `re.ASCII`); a key of several words is still a substring, as in
SillyTavern. A key written `/pattern/flags` is a regex key: it is searched in
the unlowered text by the caller's `regex_search`, which holds the turn's
time budget; without one, a regex key is not tried (compiling a reader's
pattern here would have no time bound).

The scan text is a list of parts (the messages, the `match…` sources, the
injected texts, the recursion chunks). A plain key found in the text is
found in one of its parts, since parts are joined with "\\n\\x01", so a key
is answered part by part, most often by a lookup in the part's index
(worldinfo.textindex), and a recursion pass only reads the new chunks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from worldinfo.records import AND_ALL, AND_ANY, NOT_ALL, NOT_ANY, RegexSearch
from worldinfo.textindex import PartIndex, probe_of

MATCHER = "\x01"
JOINER = "\n" + MATCHER
#: SillyTavern's parseRegexFromString: `/body/flags`, no unescaped slash inside.
#: Most contents' indexes kept across evaluations.
KEPT_INDEXES = 20_000
_REGEX_KEY = re.compile(r"^/([\s\S]+?)/([gimsuy]*)$")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")

# What one key's match came to.
FOUND, MISSING, REFUSED = "found", "missing", "refused"


def is_regex_key(key: str) -> bool:
    if not key.startswith("/"):
        return False
    match = _REGEX_KEY.match(key)
    return bool(match) and not _UNESCAPED_SLASH.search(match.group(1))


@dataclass(frozen=True, slots=True)
class Key:
    """One key with its macros filled: `text` as the reader sees it,
    `needle` as it is searched (lowered unless case sensitive)."""

    text: str
    needle: str
    regex: bool
    whole: bool
    probe: str | None = None
    exact: bool = False


def prepare(text: str, *, case_sensitive: bool, whole_words: bool) -> Key | None:
    """The key ready to match, or None for a key empty once filled
    (SillyTavern skips those)."""
    text = text.strip()
    if not text:
        return None
    if is_regex_key(text):
        return Key(text, text, True, False)
    needle = text if case_sensitive else text.lower()
    whole = whole_words and len(needle.split()) == 1
    probe, exact_sub, exact_word = probe_of(needle)
    return Key(text, needle, False, whole, probe, exact_word if whole else exact_sub)


class Matcher:
    """Answers keys against scan texts, keeping each part's index (and
    lowered form) for the evaluation. A recursion chunk is read content by
    content (`pieces`), and contents' indexes are kept in `kept` across
    evaluations, since the same contents come back turn after turn."""

    def __init__(self, regex_search: RegexSearch | None, *, kept: dict | None = None,
                 pieces: dict[str, tuple[str, ...]] | None = None):
        self._regex_search = regex_search
        self._lowered: dict[str, str] = {}
        self._indexes: dict[str, PartIndex] = {}
        self._kept = {} if kept is None else kept
        self.pieces = {} if pieces is None else pieces
        self._regex: dict[tuple[str, str], bool | None] = {}
        self._words: dict[str, re.Pattern] = {}

    def text(self, part: str, case_sensitive: bool) -> str:
        if case_sensitive:
            return part
        low = self._lowered.get(part)
        if low is None:
            low = self._lowered[part] = part.lower()
        return low

    def index(self, text: str, *, keep: bool = False) -> PartIndex:
        indexes = self._kept if keep else self._indexes
        found = indexes.get(text)
        if found is None:
            if keep and len(indexes) > KEPT_INDEXES:
                indexes.clear()
            found = indexes[text] = PartIndex(text)
        return found

    def part_index(self, part: str, case_sensitive: bool) -> PartIndex:
        """The index of a part as searched (lowered unless case sensitive);
        a recursion chunk's is the union of its contents' kept indexes."""
        text = self.text(part, case_sensitive)
        pieces = self.pieces.get(part)
        if pieces is None:
            return self.index(text)
        found = self._indexes.get(text)
        if found is None:
            found = self._indexes[text] = PartIndex.merged(
                [self.index(self.text(piece, case_sensitive), keep=True) for piece in pieces])
        return found

    def match(self, key: Key, parts: tuple[str, ...], case_sensitive: bool) -> str:
        if key.regex:
            return self._match_regex(key, parts)
        for part in parts:
            if key.probe is not None:
                index = self.part_index(part, case_sensitive)
                if key.probe not in index.subs:
                    continue
                if key.exact:
                    if not key.whole or key.needle in index.words:
                        return FOUND
                    continue
            if self._find(key, self.text(part, case_sensitive)):
                return FOUND
        return MISSING

    def _find(self, key: Key, text: str) -> bool:
        if key.needle not in text:
            return False
        if not key.whole:
            return True
        pattern = self._words.get(key.needle)
        if pattern is None:
            pattern = self._words[key.needle] = re.compile(
                rf"(?:^|\W)({re.escape(key.needle)})(?:$|\W)", re.ASCII)
        return pattern.search(text) is not None

    def _match_regex(self, key: Key, parts: tuple[str, ...]) -> str:
        if self._regex_search is None:
            return REFUSED
        text = MATCHER + JOINER.join(parts)
        memo = (text, key.text)
        if memo not in self._regex:
            self._regex[memo] = self._regex_search(key.text, text)
        found = self._regex[memo]
        return REFUSED if found is None else FOUND if found else MISSING


def secondary_passes(logic: int, answers: list[str]) -> bool:
    """SillyTavern's secondary logic over the secondary keys' answers (a
    refused key counts as not found): AND_ANY any found, NOT_ALL any not
    found, NOT_ANY none found, AND_ALL all found."""
    found = [answer == FOUND for answer in answers]
    if logic == AND_ANY:
        return any(found)
    if logic == NOT_ALL:
        return not all(found)
    if logic == NOT_ANY:
        return not any(found)
    if logic == AND_ALL:
        return all(found)
    return False


def score(logic: int, primary: list[str], secondary: list[str]) -> int:
    """SillyTavern's `getScore` for group scoring: keys found, the secondary
    ones counted only under AND_ANY, or AND_ALL when all are found."""
    if not primary:
        return 0
    hits = sum(answer == FOUND for answer in primary)
    second = sum(answer == FOUND for answer in secondary)
    if secondary and (logic == AND_ANY or (logic == AND_ALL and second == len(secondary))):
        return hits + second
    return hits
