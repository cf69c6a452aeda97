"""Seeded rolls for probability and inclusion-group weights.

SillyTavern rolls `Math.random()`; Loremaster rolls from a hash of the
turn's seed (campaign, action, attempt) and what is being rolled for, so the
same inputs give the same rolls (the inspector's record can be reproduced)
and a Retry, with a new attempt in its seed, rolls again.
"""

from __future__ import annotations

import hashlib


def roll(seed: str, *what: object) -> float:
    """A number in [0, 1) fixed by the seed and what it is for."""
    text = "\x1f".join([seed, *map(str, what)])
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
