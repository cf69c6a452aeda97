"""Markers matched on what text looks like, not on its code points.

A model reads `</іmported>` (a Cyrillic і), `<state>` in fullwidth forms, or
`[Author's\u200b note:` (a zero-width space) as the marker it imitates, so
the framing's patterns are matched on a skeleton of the text: each
character compatibility-decomposed (NFKD, which also turns fullwidth forms
and odd spaces into plain ones), format characters (Unicode category Cf:
zero-width spaces and joiners, soft hyphens, direction marks) and combining
marks dropped, and the Cyrillic, Greek and Armenian letters that look Latin
folded onto the Latin ones. A match is replaced in the original text, so
everything that imitates nothing reads exactly as written.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

#: Letters and punctuation that look like the ASCII the markers are written
#: in (Unicode's confusables, the ones a forger reaches for first).
CONFUSABLES = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ү": "y", "һ": "h",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T",
    "У": "Y", "Х": "X", "І": "I", "Ј": "J", "Ѕ": "S", "Ԁ": "D", "Ү": "Y", "Һ": "H",
    # Greek
    "α": "a", "ο": "o", "ρ": "p", "ι": "i", "κ": "k", "ν": "v", "τ": "t", "υ": "u", "χ": "x", "ε": "e",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Armenian, Latin variants
    "օ": "o", "ս": "u", "հ": "h", "ɡ": "g", "ɑ": "a", "ı": "i", "ȷ": "j", "ʀ": "R", "ɪ": "I",
    # Brackets, angles and the provenance dot
    "⟨": "<", "⟩": ">", "〈": "<", "〉": ">", "˂": "<", "˃": ">", "ᐸ": "<", "ᐳ": ">",
    "⟦": "[", "⟧": "]", "〚": "[", "〛": "]", "⁅": "[", "⁆": "]",
    "∙": "·", "⋅": "·", "・": "·", "‧": "·", "ᐧ": "·",
})


@lru_cache(maxsize=4096)
def fold_char(char: str) -> str:
    """What one character looks like, in the markers' alphabet ("" for a
    character that shows nothing)."""
    if unicodedata.category(char) == "Cf":
        return ""
    decomposed = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c) and unicodedata.category(c) != "Cf")
    return kept.translate(CONFUSABLES)


def skeleton(text: str) -> tuple[str, list[int] | None]:
    """The text folded, and for each of its characters the index of the
    original character it came from (None when nothing changed: plain ASCII
    is its own skeleton)."""
    if text.isascii():
        return text, None
    folded, origin = [], []
    for index, char in enumerate(text):
        shown = char if char.isascii() else fold_char(char)
        folded.append(shown)
        origin.extend([index] * len(shown))
    return "".join(folded), origin


def substitute(pattern: re.Pattern, text: str, replace: Callable[[re.Match], str]) -> str:
    """`pattern.sub(replace, text)`, matched on the skeleton: each match's
    span in the original text is replaced by `replace(match)`, which sees
    the folded match (so a lookalike comes out as the marker it imitated,
    defused)."""
    folded, origin = skeleton(text)
    if origin is None:
        return pattern.sub(replace, text)
    pieces, last = [], 0
    for match in pattern.finditer(folded):
        if match.end() == match.start():
            continue
        start, end = origin[match.start()], origin[match.end() - 1] + 1
        pieces += [text[last:start], replace(match)]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)
