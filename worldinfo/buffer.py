"""The scan text of one evaluation, as SillyTavern's WorldInfoBuffer holds it.

An entry reads the newest N messages (its own scan depth, else its book's,
plus the min-activations skew), each trimmed and written "Name: text" when
its book includes names; then the sources its `match…` flags name; then the
injected texts (an author's note marked scannable); then, except in a
min-activations pass, the recursion chunks (activated entries' contents).
A depth of 0 reads nothing at all, as SillyTavern's `get` returns '' for it.
"""

from __future__ import annotations

from worldinfo.matching import JOINER
from worldinfo.records import Message, ScanSources

#: SillyTavern's MAX_SCAN_DEPTH.
MAX_SCAN_DEPTH = 1000
#: Entry flag → the ScanSources field it adds.
SOURCE_FLAGS = (
    ("match_persona_description", "persona_description"),
    ("match_character_description", "character_description"),
    ("match_character_personality", "character_personality"),
    ("match_character_depth_prompt", "character_depth_prompt"),
    ("match_scenario", "scenario"),
    ("match_creator_notes", "creator_notes"),
)


class ScanBuffer:
    """Messages (newest first), sources, recursion chunks and the skew."""

    def __init__(self, messages: tuple[Message, ...], sources: ScanSources):
        self._messages = messages[:MAX_SCAN_DEPTH]
        self._sources = sources
        self._injected = tuple(text for text in sources.injected if text)
        self._lines: dict[bool, list[str]] = {}
        self._blocks: dict[tuple[bool, int], str] = {}
        self._parts: dict[tuple, tuple[str, ...]] = {}
        self.recursion: list[str] = []
        #: A recursion chunk → the contents it joins (a word never spans two).
        self.pieces: dict[str, tuple[str, ...]] = {}
        self.skew = 0

    def add_recursion(self, contents: list[str]) -> None:
        """One pass's activated contents, joined as SillyTavern joins them."""
        text = "\n".join(contents)
        if text:
            self.recursion.append(text)
            self.pieces[text] = tuple(contents)
            self._parts.clear()

    def advance(self) -> None:
        self.skew += 1
        self._parts.clear()

    def depth(self, entry_depth: int | None, book_depth: int) -> int:
        return entry_depth if entry_depth is not None else book_depth + self.skew

    def parts(self, depth: int, include_names: bool, flags: tuple[str, ...],
              with_recursion: bool) -> tuple[str, ...]:
        """The scan text's parts for an entry reading `depth` messages with
        these source flags; empty when the depth is 0."""
        memo = (depth, include_names, flags, with_recursion)
        parts = self._parts.get(memo)
        if parts is None:
            parts = self._parts[memo] = self._build(depth, include_names, flags, with_recursion)
        return parts

    def _build(self, depth: int, include_names: bool, flags: tuple[str, ...],
               with_recursion: bool) -> tuple[str, ...]:
        if depth <= 0:
            return ()
        depth = min(depth, MAX_SCAN_DEPTH)
        parts = [self._block(include_names, depth)]
        parts += [text for text in (getattr(self._sources, name) for name in flags) if text]
        parts += self._injected
        if with_recursion:
            parts += self.recursion
        return tuple(parts)

    def _block(self, include_names: bool, depth: int) -> str:
        memo = (include_names, depth)
        block = self._blocks.get(memo)
        if block is None:
            lines = self._lines.get(include_names)
            if lines is None:
                lines = self._lines[include_names] = [
                    (f"{m.name}: {m.text}" if include_names and m.name else m.text).strip()
                    for m in self._messages]
            block = self._blocks[memo] = JOINER.join(lines[:depth])
        return block


def source_flags(entry) -> tuple[str, ...]:
    """The ScanSources fields an entry's `match…` flags add."""
    return tuple(source for flag, source in SOURCE_FLAGS if getattr(entry, flag))
