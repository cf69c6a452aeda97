"""Regex keys (`/pattern/flags`) judged before they are compiled, and
compiled once per campaign (issue 23).

The `regex` module unrolls counted repetition when it compiles: `a{1000}`
becomes a thousand copies of `a`, and `(?:(?:a{100}){100}){100}` a million,
about 270 MB and seconds of a worker, before any time limit on the search
applies. So a key's size is estimated from its text first (`size_of`: the
copies of its parts that counted repetition could make, the bounds of
nested counts multiplied), and a key over `MAX_SIZE` or `MAX_LENGTH` is
refused without being compiled. A key under them compiles in about a
millisecond into at most a few hundred kilobytes (measured: about 150-300
bytes per copy).

The scanner is written for the engine's whole syntax, not only the
standard library's (`\\p{L}`, fuzzy `{e<=1}`, V1 sets), and errs towards
counting more: where it cannot tell, a brace is a count and a class ends at
its first `]`. Verbose mode is refused, because its `#` comments would let
a key hide a repetition from the scan.

Compiled keys live in a `Patterns` table that belongs to one campaign's
loaded lorebooks (knowledge.worldinfo.loading) and is freed with them, with a cap on
how many keys and how much unrolled size it holds; each compile is made
only while the turn's deadline allows it.

Pure: no Django, no database.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

import regex

#: Longest key text accepted, in characters.
MAX_LENGTH = 1_000
#: Most copies of its parts one key may unroll into when compiled.
MAX_SIZE = 1_000
#: Most unrolled copies one campaign's compiled keys may hold together (at
#: most about 15 MB); ordinary keys are ten to thirty each.
SIZE_PER_CAMPAIGN = 60_000
#: Most regex keys one campaign compiles (LOREMASTER_REGEX_KEYS_PER_CAMPAIGN's default).
KEYS_PER_CAMPAIGN = 2_000

_COUNT = re.compile(r"\{\s*(\d*)\s*(,\s*(\d*)\s*)?\}")
_VERBOSE = re.compile(r"\(\?[\w^-]*x")
#: Groups the engine reads as nothing between an item and its count: a
#: comment, and inline flags such as `(?i)`; `a(?#…){100}` is `a{100}`.
_TRANSPARENT = re.compile(r"\(\?#[^)]*\)?|\(\?[\w^-]*\)")
#: How a group opens, none of it a copy of anything: `(`, `(?:`, `(?P<name>`,
#: `(?=`, `(?<!`, `(?>`, `(?i:` ...
_OPENING = re.compile(r"\((?:\?(?:<[=!]|P?<\w*>|P?'\w*'|[:=!>|]|[\w^-]*:))?")
_ERRORS = (regex.error, ValueError, OverflowError, RecursionError, MemoryError)


def size_of(body: str, limit: int = MAX_SIZE) -> int:
    """The copies of its parts the pattern could unroll into when compiled:
    a literal, an escape or a class counts one, a group its contents, and a
    count `{m,n}` multiplies what it follows by n (by m + 1 when unbounded).
    `*`, `+` and `?` loop instead of unrolling. Stops counting past `limit`."""
    frames = [[0, 0]]  # per open group: [its size so far, the size of its last item]
    at = 0
    while at < len(body):
        char = body[at]
        frame = frames[-1]
        if char == "(" and (skipped := _TRANSPARENT.match(body, at)):
            at = skipped.end()
            continue
        if char == "{" and (count := _COUNT.match(body, at)):
            factor = _factor(count)
            frame[0] += frame[1] * (factor - 1)
            frame[1] *= factor
            if frame[0] > limit:
                return frame[0]
            at = count.end()
            continue
        if char == "(":
            frames.append([0, 0])
            at = _OPENING.match(body, at).end()
            continue
        if char == ")" and len(frames) > 1:
            inner = max(frames.pop()[0], 1)
            frames[-1][0] += inner
            frames[-1][1] = inner
        elif char == "|":
            frame[1] = 0
        elif char not in "*+?":
            frame[0] += 1
            frame[1] = 1
            at = _atom_end(body, at)
            continue
        at += 1
    return sum(f[0] for f in frames)


def _atom_end(body: str, start: int) -> int:
    """Where the one-copy item at `start` ends: an escape is two characters,
    a class runs to its first `]` (a `]` first in it, or after `^`, is one of
    its characters), anything else is one character."""
    if body[start] == "\\":
        return start + 2
    if body[start] != "[":
        return start + 1
    at = start + 1
    if body.startswith("^", at):
        at += 1
    if body.startswith("]", at):
        at += 1
    while at < len(body):
        if body[at] == "\\":
            at += 2
        elif body[at] == "]":
            return at + 1
        else:
            at += 1
    return len(body)


def _factor(count: re.Match) -> int:
    """What a count multiplies by: its upper bound, or its lower bound and
    one loop when unbounded; never less than one."""
    low = _number(count.group(1))
    if count.group(2) is None:
        return max(low, 1)
    high = count.group(3)
    return max(_number(high) if high else low + 1, 1)


def _number(digits: str | None) -> int:
    return int(digits) if digits and len(digits) <= 12 else (10**12 if digits else 0)


def split(key: str) -> tuple[str, str]:
    """A `/pattern/flags` key's pattern and flags."""
    end = key.rfind("/")
    return key[1:end], key[end + 1:]


def problem(key: str) -> str:
    """Why the key cannot be compiled safely, judged from its text alone; ""
    when it can be. Nothing is compiled here."""
    body, _ = split(key)
    if len(key) > MAX_LENGTH:
        return f"the pattern {key[:60]}… is {len(key):,} characters long; the limit is {MAX_LENGTH:,}"
    if _VERBOSE.search(body):
        return f"the pattern {key} uses verbose mode (x), which Loremaster does not read in a key"
    size = size_of(body)
    if size > MAX_SIZE:
        return (
            f"the pattern {key} repeats too much: compiled, it would unroll into over {min(size, 10**9):,} "
            f"copies of its parts; the limit is {MAX_SIZE:,}"
        )
    return ""


def compile_key(key: str):
    """The key compiled, or None and why not. Checked first (`problem`), so a
    key that would explode is never compiled, in a worker or a web process."""
    refusal = problem(key)
    return (None, refusal) if refusal else _compiled(key)


def _compiled(key: str):
    """A checked key compiled with JavaScript's flags i, m and s (g, u and y
    change nothing for a yes-or-no search), or None and why not."""
    body, flags = split(key)
    options = regex.V0
    options |= regex.IGNORECASE if "i" in flags else 0
    options |= regex.MULTILINE if "m" in flags else 0
    options |= regex.DOTALL if "s" in flags else 0
    try:
        return regex.compile(body, options), ""
    except _ERRORS as exc:
        return None, f"the pattern {key} is not a regular expression Loremaster can read ({exc})"


#: Why a key was not tried this turn (it is tried again on the next).
OUT_OF_TIME = "the turn's time for regex keys ran out before it was tried"


class Patterns:
    """One campaign's compiled regex keys, each compiled at most once while
    the table lives (it is dropped with the campaign's loaded lorebooks), at most
    `max_keys` of them and `max_size` unrolled copies in all. Refusals are
    remembered too, so a refused key costs nothing on later turns.

    Two turns of one campaign may compile the same key at once; the second
    result replaces the first, which is only wasted work."""

    def __init__(self, *, max_keys: int = KEYS_PER_CAMPAIGN, max_size: int = SIZE_PER_CAMPAIGN):
        self.max_keys = max_keys
        self.max_size = max_size
        #: The keys held compiled, and their unrolled size together.
        self.held = 0
        self.size = 0
        #: How many keys this table compiled (the benchmark and the tests read it).
        self.compiles = 0
        self._known: dict[str, tuple[object, str]] = {}

    def adopt(self, other: Patterns, wanted: Iterable[str]) -> None:
        """Takes over `other`'s compiled keys that are still `wanted` (the
        library changed, most of its keys did not), within this table's
        limits; the rest are freed with `other`."""
        known = dict(list(other._known.items()))
        for key in dict.fromkeys(wanted):
            pattern, _ = known.get(key, (None, ""))
            size = size_of(split(key)[0]) if pattern is not None else 0
            if pattern is not None and self.held < self.max_keys and self.size + size <= self.max_size:
                self._known[key] = (pattern, "")
                self.held += 1
                self.size += size

    def get(self, key: str, deadline: float):
        """The compiled key, or None and why not. A key not yet known is
        compiled only if `deadline` (time.monotonic()) has not passed."""
        known = self._known.get(key)
        if known is not None:
            return known
        if time.monotonic() >= deadline:
            return None, OUT_OF_TIME
        refusal = problem(key)
        size = 0 if refusal else size_of(split(key)[0])
        if not refusal and self.held >= self.max_keys:
            refusal = f"{key} would be past the {self.max_keys:,} regex keys one campaign may use"
        elif not refusal and self.size + size > self.max_size:
            refusal = f"{key} would take the campaign's regex keys past {self.max_size:,} unrolled copies of their parts"
        result = (None, refusal) if refusal else _compiled(key)
        if not refusal:
            self.compiles += 1
            self.held += result[0] is not None
            self.size += size if result[0] is not None else 0
        self._known[key] = result
        return result
