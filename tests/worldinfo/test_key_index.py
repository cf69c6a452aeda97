"""The indexed key matching answers exactly as SillyTavern's matchKeys
would on the joined text: checked against a direct port of matchKeys over
many keys and texts, with accents, underscores, punctuation, digits and
words longer than the index cuts."""

import random
import re

import pytest

from tests.factories import EntryFactory
from tests.worldinfo.story import run, titles
from worldinfo.matching import FOUND, JOINER, MATCHER, Matcher, prepare

ALPHABET = ["a", "b", "é", "_", "1", " ", "'", "-", ".", "B", "ß"]


def st_match_keys(haystack: str, needle: str, case_sensitive: bool, whole_words: bool) -> bool:
    """world-info.js matchKeys for a plain key, as written there."""
    if not case_sensitive:
        haystack, needle = haystack.lower(), needle.lower()
    if whole_words and len(re.split(r"\s+", needle)) == 1:
        return re.search(rf"(?:^|\W)({re.escape(needle)})(?:$|\W)", haystack, re.ASCII) is not None
    return needle in haystack


def texts(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(size))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunked", [False, True])
def test_indexed_matching_agrees_with_sillytaverns_match_keys(seed, chunked):
    """With `chunked`, the last part is a recursion chunk read content by
    content, as the engine reads one."""
    rng = random.Random(seed)
    contents = [texts(rng, rng.randrange(1, 30)) for _ in range(4)] + ["a" * 40 + "b"]
    parts = tuple(texts(rng, rng.randrange(1, 80)) for _ in range(3)) + ("\n".join(contents),)
    joined = MATCHER + JOINER.join(parts)
    matcher = Matcher(None, pieces={parts[-1]: tuple(contents)} if chunked else {})
    found = 0
    for _ in range(400):
        raw = texts(rng, rng.randrange(1, 6)).strip() or "a"
        if rng.random() < 0.1:
            raw = "a" * rng.randrange(20, 40)
        for case in (False, True):
            for whole in (False, True):
                key = prepare(raw, case_sensitive=case, whole_words=whole)
                expected = st_match_keys(joined, raw, case, whole)
                assert (matcher.match(key, parts, case) == FOUND) is expected, (raw, case, whole)
                found += expected
    assert 200 < found < 1400


@pytest.mark.parametrize("seed", range(4))
def test_the_engine_looks_at_every_entry_a_key_could_match(seed):
    """The engine only looks closely at entries whose keys' probes are in
    the scan text; none that SillyTavern would activate is missed."""
    rng = random.Random(seed)
    story = [texts(rng, rng.randrange(5, 60)) for _ in range(3)]
    entries = [EntryFactory(title=f"E{n}", keys=tuple(texts(rng, rng.randrange(1, 4)).strip() or "a"
                                                      for _ in range(2)), match_whole_words=n % 2 == 0)
               for n in range(300)]
    newest_two = MATCHER + JOINER.join(text.strip() for text in reversed(story[1:]))
    expected = [e.title for e in sorted(entries, key=lambda e: -e.order)
                if any(st_match_keys(newest_two, key, False, e.match_whole_words) for key in e.keys)]
    assert titles(run(entries, story)) == expected
