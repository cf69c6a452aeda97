"""Splitting an imported file into passages: a pure function.

Text and a token counter in, passages out: no Django, no database, no clock,
so the same file always gives the same passages and the rules are tested
with plain `parametrize`.

The rules, in the order they apply:

1. Markdown headings (ATX `#`..`######`, and setext `===`/`---` underlines)
   start a section; every passage carries the trail of headings above it
   ("Westhaven > The Harbour > Tides"). A `#` line inside a fenced code block
   is not a heading. Plain text without headings is one untitled section.
   The trail is stored with every passage and indexed with it, so what it
   holds is bounded whatever the file: a heading is cut at HEADING_CHARS,
   and a trail longer than TRAIL_CHARS keeps its nearest headings, with "…"
   where the outer ones were (one long `#` over 500 short sections once
   stored 25 MB for a 57 KB file).
2. A section is cut into blocks at blank lines (paragraphs, lists, fenced
   code). Blocks are packed, in order, into passages of about `target`
   tokens and never more than `maximum`.
3. A block too big for `maximum` on its own is cut at line breaks, then at
   sentence ends, then between words: never inside a word. (A single
   "word" longer than `maximum`, such as a pasted blob, is kept whole as its
   own passage, because cutting it would break the one rule above this one.)
4. Nothing empty is ever emitted: a heading with no text under it only
   contributes to the trail of the passages below it.
5. In a file cut into more than `join_from` passages, a section smaller
   than `minimum` tokens is not a passage of its own: it joins its
   neighbours, each part under its own heading line, and the passage
   carries the trail they share. A passage costs a row, its lexical index
   and a vector whatever its size; a 5 MB file of one-line sections once
   made 382,420 passages and 97.5 MB (issue 23). A smaller file keeps every
   section's own passage and trail, which retrieval is tuned on.

Counting is linear: each piece is counted once, and a passage's count is the
sum of its pieces plus one per join. Counting the finished passage again
would double the cost of the slowest step of an import; the sum is at most a
token or so per join above the true count, the safe direction for a budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

TARGET_TOKENS = 280
MAXIMUM_TOKENS = 400
#: A passage smaller than this is joined to its neighbours (rule 5) in a
#: file that would make more than JOIN_FROM_PASSAGES passages.
MINIMUM_TOKENS = 32
JOIN_FROM_PASSAGES = 1000
TRAIL_SEPARATOR = " > "
#: A heading longer than this is cut, with "…" in place of the rest. Real
#: headings are a few words; a whole paragraph after `#` is not one.
HEADING_CHARS = 100
#: What a passage's trail may hold: room for a few real headings. Twice a
#: heading, so the nearest one always fits after a cut marker.
TRAIL_CHARS = 2 * HEADING_CHARS
ELLIPSIS = "…"

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# Whitespace after a sentence end, which may be followed by a closing quote or
# bracket (two fixed-width look-behinds, as `re` allows no variable width).
_SENTENCE_END = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"'”’)\]]))\s+")


@dataclass(frozen=True)
class Passage:
    index: int
    heading_path: str
    text: str
    token_count: int
    #: The lorebook entry it was cut from (`chunk_entries`), else None.
    entry: int | None = None


def chunk_text(
    text: str,
    *,
    count: Callable[[str], int],
    target: int = TARGET_TOKENS,
    maximum: int = MAXIMUM_TOKENS,
    minimum: int = MINIMUM_TOKENS,
    join_from: int = JOIN_FROM_PASSAGES,
) -> list[Passage]:
    """The passages of `text`, in document order, numbered from 0."""
    if not 0 < target <= maximum:
        raise ValueError("need 0 < target <= maximum")
    packer = _Packer(count=count, target=target, maximum=maximum)
    for trail, blocks in _sections(_normalise(text)):
        packer.section(_trail_text(trail), blocks)
    if len(packer.passages) <= join_from:
        return packer.passages
    return _joined(packer.passages, count=count, minimum=min(minimum, target), target=target)


def _joined(passages: list[Passage], *, count: Callable[[str], int], minimum: int, target: int) -> list[Passage]:
    """Rule 5: runs of small passages joined, up to `target` tokens, and
    numbered again. A passage at least `minimum` long is left as it was."""
    groups: list[list[Passage]] = []
    tokens = 0
    for passage in passages:
        small = passage.token_count < minimum or (groups and tokens < minimum)
        if groups and small and tokens + passage.token_count + 8 <= target:
            groups[-1].append(passage)
            tokens += passage.token_count + 8
        else:
            groups.append([passage])
            tokens = passage.token_count
    return [_one_passage(group, index, count) for index, group in enumerate(groups)]


def _one_passage(group: list[Passage], index: int, count: Callable[[str], int]) -> Passage:
    if len(group) == 1:
        return Passage(index, group[0].heading_path, group[0].text, group[0].token_count, group[0].entry)
    trails = [p.heading_path.split(TRAIL_SEPARATOR) if p.heading_path else [] for p in group]
    shared = 0
    while all(len(t) > shared and t[shared] == trails[0][shared] for t in trails):
        shared += 1
    parts, tokens = [], 0
    for passage, trail in zip(group, trails, strict=True):
        heading = TRAIL_SEPARATOR.join(trail[shared:])
        text = f"{heading}\n{passage.text}" if heading else passage.text
        parts.append(text)
        tokens += passage.token_count + (count(heading) + 1 if heading else 0)
    return Passage(index, TRAIL_SEPARATOR.join(trails[0][:shared]), "\n\n".join(parts), tokens + len(group) - 1)


def chunk_entries(
    entries: Iterable[tuple[int, str, str]],
    *,
    count: Callable[[str], int],
    target: int = TARGET_TOKENS,
    maximum: int = MAXIMUM_TOKENS,
) -> list[Passage]:
    """The passages of lorebook entries, given as (entry id, title, text),
    numbered from 0 across them. Each entry is cut on its own, so no passage
    holds two entries (an entry's keys admit its own text only), and its
    title heads the trail of every passage cut from it."""
    passages: list[Passage] = []
    for entry_id, title, text in entries:
        heading = _heading_text(title)
        for part in chunk_text(text, count=count, target=target, maximum=maximum):
            trail = [heading] if heading else []
            trail += part.heading_path.split(TRAIL_SEPARATOR) if part.heading_path else []
            passages.append(Passage(len(passages), _trail_text(trail), part.text, part.token_count, entry=entry_id))
    return passages


def _trail_text(trail: list[str]) -> str:
    """The trail as stored: the nearest headings that fit in TRAIL_CHARS,
    with "…" in place of the outer ones left out."""
    joined = TRAIL_SEPARATOR.join(trail)
    if len(joined) <= TRAIL_CHARS:
        return joined
    kept: list[str] = []
    room = TRAIL_CHARS - len(ELLIPSIS)
    for title in reversed(trail):
        room -= len(TRAIL_SEPARATOR) + len(title)
        if room < 0:
            break
        kept.insert(0, title)
    return TRAIL_SEPARATOR.join([ELLIPSIS, *kept])


def _normalise(text: str) -> str:
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def _heading_text(raw: str | None) -> str:
    title = " ".join((raw or "").split())
    if len(title) <= HEADING_CHARS:
        return title
    return title[: HEADING_CHARS - len(ELLIPSIS)].rstrip() + ELLIPSIS


def _sections(text: str):
    """Yields (heading trail, [block text]) for each section, in order.

    One pass over the lines: a stack of (level, title) is the trail, and the
    current block collects lines until a blank line, a heading or a fence
    boundary ends it.
    """
    stack: list[tuple[int, str]] = []
    blocks: list[str] = []
    lines: list[str] = []
    fence: str | None = None
    front_matter = text.startswith("---\n")

    def end_block():
        if lines:
            block = "\n".join(lines).strip()
            if block:
                blocks.append(block)
            lines.clear()

    def trail():
        return [title for _, title in stack if title]

    for line in text.split("\n"):
        if fence is not None:
            lines.append(line)
            if line.strip().startswith(fence):
                fence = None
                end_block()
            continue
        if front_matter:
            # YAML front matter is kept as a block of text, and its closing
            # `---` is not a setext underline.
            lines.append(line)
            if len(lines) > 1 and line.strip() in ("---", "..."):
                front_matter = False
                end_block()
            continue
        opened = _FENCE.match(line)
        if opened:
            end_block()
            fence = opened.group(1)[0] * 3
            lines.append(line)
            continue
        atx = _ATX.match(line)
        if atx:
            end_block()
            if blocks:
                yield trail(), blocks
                blocks = []
            level = len(atx.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, _heading_text(atx.group(2))))
            continue
        setext = _SETEXT.match(line)
        if setext and len(lines) == 1 and lines[0].strip():
            title = _heading_text(lines[0])
            lines.clear()
            if blocks:
                yield trail(), blocks
                blocks = []
            level = 1 if setext.group(1)[0] == "=" else 2
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            continue
        if not line.strip():
            end_block()
            continue
        lines.append(line)
    end_block()
    if blocks:
        yield trail(), blocks


class _Packer:
    """Greedy packing of pieces into passages under a target and a maximum.

    Each piece carries the joiner that goes before it when it follows other
    text in the same passage. A join is counted as one token.
    """

    #: How an over-long piece is cut, coarsest first.
    _SPLITTERS = ("lines", "sentences", "words")

    def __init__(self, *, count: Callable[[str], int], target: int, maximum: int):
        self.count = count
        self.target = target
        self.maximum = maximum
        self.passages: list[Passage] = []
        self._parts: list[str] = []
        self._tokens = 0
        self._trail = ""

    def section(self, trail: str, blocks: list[str]) -> None:
        self._trail = trail
        for block in blocks:
            self._add(block, self.count(block), "\n\n", level=0)
        self._flush()

    def _add(self, piece: str, tokens: int, joiner: str, *, level: int) -> None:
        if tokens > self.maximum and level < len(self._SPLITTERS):
            for i, (part, part_joiner) in enumerate(self._split(piece, self._SPLITTERS[level])):
                self._add(part, self.count(part), joiner if i == 0 else part_joiner, level=level + 1)
            return
        if self._parts:
            total = self._tokens + 1 + tokens
            if total > self.maximum or (total > self.target and self._tokens >= self.target // 2):
                self._flush()
        if self._parts:
            self._parts += [joiner, piece]
            self._tokens += 1 + tokens
        else:
            self._parts = [piece]
            self._tokens = tokens

    @staticmethod
    def _split(piece: str, kind: str) -> list[tuple[str, str]]:
        if kind == "lines":
            parts, joiner = piece.split("\n"), "\n"
        elif kind == "sentences":
            parts, joiner = _SENTENCE_END.split(piece), " "
        else:
            parts, joiner = piece.split(), " "
        return [(part.strip(), joiner) for part in parts if part.strip()]

    def _flush(self) -> None:
        if self._parts:
            self.passages.append(
                Passage(
                    index=len(self.passages),
                    heading_path=self._trail,
                    text="".join(self._parts),
                    token_count=self._tokens,
                )
            )
        self._parts = []
        self._tokens = 0
