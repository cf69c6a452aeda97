"""Whether a narration repeats what it was told in secret.

A narrator given narrator-only lore, or one seat's secret, sometimes writes
it out word for word where every player reads it. A long run of the same
words (MIN_WORDS or more, compared without case or punctuation) shared by
the narration and such a passage is taken as a leak: short runs are the
ordinary words any two texts share. The passages are read back from the
narration's own report, so the check is against what that prompt held.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .builder import GAME_MASTER
from .rules import HIDDEN_MARKER, PASSAGES_CLOSE, PASSAGES_OPEN

#: Words in a row a narration must share with a secret to be flagged.
MIN_WORDS = 8
#: The audience of narrator-only lore: no reader at all.
NARRATOR = "narrator"

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


@dataclass(frozen=True)
class Passage:
    """A secret the prompt held: who may know it, what to call it, its text."""

    audience: str
    label: str
    text: str


@dataclass(frozen=True)
class Leak:
    audience: str
    label: str
    words: str

    def as_record(self) -> dict:
        return {"audience": self.audience, "label": self.label, "words": self.words}


def words(text: str) -> list[str]:
    """The text's words, lower case, with curly and straight apostrophes alike."""
    return [w.replace("’", "'") for w in _WORD.findall(text.casefold())]


def find(narration: str, passages: list[Passage], *, min_words: int = MIN_WORDS) -> list[Leak]:
    """Each passage the narration shares a run of `min_words` words with,
    with the longest such run, once per passage."""
    told = words(narration)
    if len(told) < min_words:
        return []
    starts: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(told) - min_words + 1):
        starts.setdefault(tuple(told[i:i + min_words]), []).append(i)
    leaks = []
    for passage in passages:
        secret = words(passage.text)
        best: list[str] = []
        for i in range(len(secret) - min_words + 1):
            for j in starts.get(tuple(secret[i:i + min_words]), ()):
                n = min_words
                while i + n < len(secret) and j + n < len(told) and secret[i + n] == told[j + n]:
                    n += 1
                if n > len(best):
                    best = secret[i:i + n]
        if best:
            leaks.append(Leak(passage.audience, passage.label, " ".join(best)))
    return leaks


def _inner(text: str) -> str:
    """A framed section's passages without its framing line (the app's words)."""
    opened, _, rest = text.partition(PASSAGES_OPEN)
    return rest.rpartition(PASSAGES_CLOSE)[0] if rest else opened


def secret_passages(report: dict) -> list[Passage]:
    """The narrator-only and seat-only passages a stored report says its
    prompt held: narrator-only library passages, World Info sections of
    narrator-only books, and every section meant for one seat."""
    report = report if isinstance(report, dict) else {}
    found = []
    knowledge = report.get("knowledge") if isinstance(report.get("knowledge"), dict) else {}
    for used in knowledge.get("used") or []:
        if isinstance(used, dict) and used.get("visibility") == "hidden" and used.get("text"):
            label = f"{used.get('filename') or used.get('title') or 'lore'} · passage {int(used.get('chunk_index') or 0) + 1}"
            found.append(Passage(NARRATOR, label, str(used["text"])))
    for section in report.get("sections") or []:
        if not isinstance(section, dict):
            continue
        text, audience = str(section.get("text") or ""), str(section.get("audience") or "")
        label = str(section.get("label") or "section")
        if audience and audience != GAME_MASTER:
            found.append(Passage(audience, label, _inner(text)))
        elif label.startswith("world_info") and text.partition("\n")[0].endswith(HIDDEN_MARKER):
            found.append(Passage(NARRATOR, label, _inner(text)))
    return found
