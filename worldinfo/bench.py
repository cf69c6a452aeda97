"""A synthetic lorebook and scene for timing the engine (`manage.py bench`).

The book is built deterministically (a linear congruential generator, not
`random`, so every run times the same work): entries keyed on words of a
made-up vocabulary, some with secondary keys, some whole-word, a few
constant, spread over inclusion groups, their contents naming other
entries' keys so recursion has something to find. The scene is `words`
words over the newest messages, naming a few dozen keys.

The clock is handed in (`clock`, e.g. time.perf_counter): the engine's
package is kept free of one by its purity contract.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from worldinfo.engine import evaluate
from worldinfo.records import AND_ALL, AND_ANY, NOT_ANY, BookSettings, Entry, Inputs, Message

_SYLLABLES = ("ka", "lor", "vin", "dra", "mel", "tor", "shi", "ber", "qua", "nim", "zel", "rho", "fen", "ul")


class _Numbers:
    """Numerical Recipes' LCG: enough spread for a synthetic book."""

    def __init__(self, seed: int):
        self.state = seed

    def below(self, limit: int) -> int:
        self.state = (1664525 * self.state + 1013904223) % 2**32
        return self.state * limit >> 32


def _word(n: int) -> str:
    letters = []
    while True:
        n, rest = divmod(n, len(_SYLLABLES))
        letters.append(_SYLLABLES[rest])
        if n == 0:
            return "".join(letters)
        n -= 1


def book(entries: int, groups: int, words: int) -> Inputs:
    """The synthetic evaluation: `entries` entries, `groups` groups, a
    scene of `words` words, recursion on."""
    numbers = _Numbers(25)
    vocabulary = [_word(n + 200) for n in range(max(entries * 2, 100))]
    built = []
    for n in range(entries):
        filler = [vocabulary[numbers.below(len(vocabulary))] if numbers.below(30) == 0 else "and"
                  for _ in range(30)]
        built.append(Entry(
            key=f"e{n}", fingerprint=f"e{n}:1", book="bench", title=f"Entry {n}",
            content=" ".join(["The", vocabulary[2 * n], "of", *filler]), tokens=40,
            keys=(vocabulary[2 * n], vocabulary[2 * n + 1].title()),
            secondary_keys=(vocabulary[numbers.below(len(vocabulary))],) if n % 5 == 0 else (),
            logic=(AND_ANY, NOT_ANY, AND_ALL)[n % 3], constant=n % 250 == 0, order=numbers.below(300),
            groups=(f"group {n % groups}",) if groups and n % 10 == 0 else (),
            match_whole_words=n % 4 == 0, probability=50 if n % 7 == 0 else 100,
        ))
    scene = [vocabulary[numbers.below(len(vocabulary))] if numbers.below(12) == 0 else "the"
             for _ in range(words)]
    half = len(scene) // 2
    messages = (Message("Reader", " ".join(scene[:half])), Message("Narrator", " ".join(scene[half:])),
                Message("Reader", "An older message."))
    return tuple(built), messages


def measure(entries: int = 2500, groups: int = 20, recursion_steps: int = 3, words: int = 450, runs: int = 50,
            *, clock: Callable[[], float]) -> dict:
    """p50 and p95 of one evaluation in milliseconds (after one untimed
    evaluation, as a story's later turns find the book prepared), every
    sample, and what the evaluation did."""
    built, messages = book(entries, groups, words)
    inputs = Inputs(entries=built, messages=messages, chat_length=40, budget_tokens=200_000, seed="bench",
                    books={"bench": BookSettings(recursive=True, max_recursion_steps=recursion_steps)})
    result = evaluate(inputs, count=lambda text: len(text.split()))
    samples = []
    for _ in range(runs):
        started = clock()
        result = evaluate(inputs, count=lambda text: len(text.split()))
        samples.append((clock() - started) * 1000)
    samples.sort()
    return {"p50_ms": statistics.median(samples), "p95_ms": samples[min(len(samples) - 1, int(len(samples) * 0.95))],
            "samples_ms": samples, "runs": runs, "entries": entries, "activated": len(result.activated),
            "passes": result.passes}
