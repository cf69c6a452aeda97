"""Deterministic demo embeddings: a signed, feature-hashed bag of words.

Texts that share words point the same way and unrelated texts are near
orthogonal, which is all retrieval tests need, with no model weights.
"""

import base64
import math
import re
import struct

from .narration import stable_hash

DIMENSIONS = 384


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def embed(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """1. Hash each lowercased word to a bucket and a sign (from an unrelated
    bit, so collisions cancel as often as they add). 2. L2-normalise.
    3. Round through float32, so the float and base64 formats agree exactly.
    """
    vector = [0.0] * dimensions
    for word in words(text):
        digest = stable_hash(word)
        vector[digest % dimensions] += 1.0 if digest >> 63 else -1.0
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return list(struct.unpack(f"<{dimensions}f", _float32_bytes([v / norm for v in vector])))


def encode_base64(vector: list[float]) -> str:
    """The `encoding_format="base64"` form: little-endian float32, as OpenAI sends."""
    return base64.b64encode(_float32_bytes(vector)).decode("ascii")


def _float32_bytes(vector: list[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)
