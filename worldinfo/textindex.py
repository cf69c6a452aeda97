"""Indexes of one scan-text part, so most keys are answered by a set lookup.

Every character of a key's word run (`\\w+`) is a word character, so where
the key occurs in a text, each of its runs lies inside one run of the text:
the substrings (up to `CAP` long) of the text's runs therefore answer
"could this key be here" for every key, and answer it exactly for a key
that is one run. Whole-word matching with JavaScript's ASCII `\\W` is a
lookup among the text's maximal ASCII word runs for a key made only of
ASCII word characters. Other keys take the probe as a filter, then the
real search.
"""

from __future__ import annotations

import re

#: Longest substring indexed; longer keys are probed by their first CAP characters.
CAP = 24
_RUN = re.compile(r"\w+")
_ASCII_RUN = re.compile(r"[A-Za-z0-9_]+")
#: Runs up to this long are cut by a precomputed table of slices (the cut
#: then runs in C: an index is built for every part of every pass).
_TABLED = 64
_SLICES = [tuple(slice(start, end) for start in range(size) for end in range(start + 1, min(size, start + CAP) + 1))
           for size in range(_TABLED + 1)]


class PartIndex:
    """The substrings of a text's word runs and its ASCII word runs."""

    __slots__ = ("subs", "_text", "_words")

    def __init__(self, text: str):
        self._text = text
        self._words: set[str] | None = None
        subs: set[str] = set()
        for run in set(_RUN.findall(text)):
            size = len(run)
            if size <= _TABLED:
                subs.update(map(run.__getitem__, _SLICES[size]))
                continue
            for start in range(size):
                subs.update(run[start:end] for end in range(start + 1, min(size, start + CAP) + 1))
        self.subs = subs

    @classmethod
    def merged(cls, indexes: list[PartIndex]) -> PartIndex:
        """The index of texts joined with a newline (no run spans two)."""
        joined = cls.__new__(cls)
        joined._text = "\n".join(index._text for index in indexes)
        joined._words = None
        joined.subs = set().union(*(index.subs for index in indexes))
        return joined

    @property
    def words(self) -> set[str]:
        if self._words is None:
            self._words = set(_ASCII_RUN.findall(self._text))
        return self._words


def probe_of(needle: str) -> tuple[str | None, bool, bool]:
    """(probe, exact as a substring, exact as a whole ASCII word) for a
    needle: the probe is the needle's longest word run (cut to CAP), None
    when it has none (it must be searched in full)."""
    runs = _RUN.findall(needle)
    if not runs:
        return None, False, False
    longest = max(runs, key=len)
    one_run = len(runs) == 1 and longest == needle
    return longest[:CAP], one_run and len(needle) <= CAP, bool(_ASCII_RUN.fullmatch(needle))
