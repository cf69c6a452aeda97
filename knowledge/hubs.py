"""Hubs: short, generic passages that sit close to almost every scene.

In embedding space a two-line song or a motto is near everything: measured
with all-MiniLM-L6-v2, one such passage scored 0.45-0.55 against every
held-out scene, above the model's floor for all of them, so meaning alone
would put it into every turn. A passage is a hub when its vector clears the
model's floor against more than HUB_SHARE of a neutral query set shipped with
the app (knowledge/data/neutral_scenes.json: sixty story moments over ten
genres, none about any library's subject). It is measured when the vector is
stored, and retrieval admits a hub semantically only when the lexical path
admits it too (knowledge.ranking names the rule).

Measured with all-MiniLM-L6-v2 on the evaluation libraries, though, no
passage cleared its floor against more than 5 % of the neutral scenes, the
two-line motto of a maritime library included: the model reads the motto as
about the sea, and it scored 0.39-0.52 against every scene of that library,
all of them at sea. What made it a hub there was its length: eighteen words
say too little to be about one thing. So a passage shorter than
SHORT_TOKENS is a hub as well, whatever the neutral scenes say.

The neutral set's vectors are made once per process and model, with the same
model as the passages; when they cannot be made (the endpoint fails, the
model has no floor), the passages get no measurement and no hub rule.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

NEUTRAL = Path(__file__).parent / "data" / "neutral_scenes.json"
#: Vectors as stored (endpoints.embeddings.DTYPE).
DTYPE = np.dtype("<f4")
#: Clearing the floor against more than this share of the neutral scenes is
#: what no passage about one subject does.
HUB_SHARE = 0.5
#: A passage this short (in tokens) is a hub: on the evaluation libraries
#: the shortest passage about one thing ran to ~70 tokens, the motto to ~20.
SHORT_TOKENS = 40

_neutral: dict[str, np.ndarray] = {}
_lock = threading.Lock()


def neutral_scenes(path: Path = NEUTRAL) -> list[str]:
    return [scene["text"] for scene in json.loads(path.read_text(encoding="utf-8"))["scenes"]]


def shares(vectors: Sequence[bytes], neutral: np.ndarray, floor: float) -> list[float]:
    """For each float32 vector, the share of neutral vectors (unit rows) it
    clears `floor` against, rounded."""
    if not vectors:
        return []
    cleared = _unit_rows(vectors) @ neutral.T >= floor
    return [round(float(share), 4) for share in cleared.mean(axis=1)]


def hub_reason(share: float | None, tokens: int) -> str:
    """Why a passage is a hub, in words for the inspector; "" when it is not."""
    if share is not None and share > HUB_SHARE:
        return f"as close to {share:.0%} of the neutral scenes"
    if tokens < SHORT_TOKENS:
        return f"{tokens} tokens, too short to be about one thing"
    return ""


def measured(
    model: str, vectors: Sequence[bytes], *, floor: float | None, embed: Callable[[list[str]], list[bytes]]
) -> list[float | None]:
    """Each vector's neutral share, or None for each when it cannot be
    measured; `embed` makes vectors with the passages' model."""
    if floor is None or not vectors:
        return [None] * len(vectors)
    neutral = _neutral_for(model, embed)
    if neutral is None or neutral.shape[1] * DTYPE.itemsize != len(vectors[0]):
        return [None] * len(vectors)
    return shares(vectors, neutral, floor)


def _neutral_for(model: str, embed: Callable[[list[str]], list[bytes]]) -> np.ndarray | None:
    with _lock:
        cached = _neutral.get(model)
    if cached is not None:
        return cached
    try:
        made = embed(neutral_scenes())
    except Exception as exc:  # only the hub measurement is lost, never the vectors
        log.warning("Could not embed the neutral scenes with %s: %s", model, exc)
        return None
    matrix = _unit_rows(made)
    with _lock:
        _neutral[model] = matrix
    return matrix


def _unit_rows(vectors: Sequence[bytes]) -> np.ndarray:
    matrix = np.frombuffer(b"".join(vectors), dtype=DTYPE).reshape(len(vectors), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms
