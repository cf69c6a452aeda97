"""Deterministic demo embeddings: a signed, feature-hashed bag of words.

Texts that share words point the same way and unrelated texts are near
orthogonal, which is all retrieval tests need, with no model weights. Common
function words are left out, as a trained model all but ignores them: without
that, any two English paragraphs share "the", "and" and "of" and score 0.4,
and no relevance floor could separate related passages from unrelated ones
(`manage.py calibrate_embeddings` measures exactly that). Everyday words
(knowledge.query.vocabulary.common_word) are left out for the same reason: a turn's
query is a page of prose, and with them a bakery scene scored above the
floor against half a harbour city's lore.
"""

import base64
import math
import re
import struct

from knowledge.query.vocabulary import common_word

from .narration import stable_hash

#: Wide enough that hash collisions between two pages of prose stay below
#: the floor: at 384, two texts sharing one word scored up to 0.22 by
#: collisions alone, above the measured floor.
DIMENSIONS = 1024

#: Function words, which carry no topic.
FUNCTION_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself s t""".split()
)


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def embed(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """1. Hash each lowercased word to a bucket and a sign (from an unrelated
    bit, so collisions cancel as often as they add). 2. L2-normalise.
    3. Round through float32, so the float and base64 formats agree exactly.
    """
    vector = [0.0] * dimensions
    for word in words(text):
        if word in FUNCTION_WORDS or common_word(word):
            continue
        digest = stable_hash(word)
        vector[digest % dimensions] += 1.0 if digest >> 63 else -1.0
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return list(struct.unpack(f"<{dimensions}f", _float32_bytes([v / norm for v in vector])))


def encode_base64(vector: list[float]) -> str:
    """The `encoding_format="base64"` form: little-endian float32, as OpenAI sends."""
    return base64.b64encode(_float32_bytes(vector)).decode("ascii")


def _float32_bytes(vector: list[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)
