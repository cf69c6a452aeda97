"""Passage vectors from the campaign's endpoint profile's embedding model.

A model named `local:…` is computed in the worker itself (localembed),
with no server; any other is asked of the profile's endpoint. A profile
that names none takes the instance's default (LOREMASTER_EMBEDDING_MODEL),
so one setting turns local embeddings on for every campaign. Endpoint calls
go through `client.client_for`, which re-checks the endpoint allowlist at
call time; failures are worded by `errors.describe`.
Vectors are stored as little-endian float32 bytes with the model's name, so
a query never meets a vector from another model. The reply is untrusted: any
shape but one flat, finite vector per text fails with a reason, never a crash.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Iterator, Sequence
from functools import partial

import httpx
import numpy as np
import openai
from django.conf import settings
from django.core.exceptions import ValidationError

from . import localembed
from .client import client_for, endpoint_for
from .errors import POOLING_ADVICE, describe, is_temporary, upstream_detail
from .models import EndpointProfile

log = logging.getLogger(__name__)

#: Passages per request: large enough to amortise the round trip, small
#: enough to stay under common request-size limits.
BATCH_SIZE = 64
DTYPE = np.dtype("<f4")

#: The query embedding gets at most this long, whatever the profile allows:
#: a stalled endpoint must cost the semantic half, not the turn's patience.
QUERY_EMBED_TIMEOUT = 15.0


class EmbeddingUnavailable(Exception):
    """A temporary endpoint failure (unreachable, timeout, 429, 5xx): retry later."""


class EmbeddingFailed(Exception):
    """A failure retrying will not fix (bad key, unknown model, rejected input)."""


def model_of(profile: EndpointProfile | None) -> str:
    """The embedding model a profile uses: its own, else the instance's
    default; "" for none (lexical only)."""
    if profile is None:
        return ""
    return profile.embedding_model.strip() or settings.LOREMASTER_EMBEDDING_MODEL.strip()


def profile_for(campaign) -> EndpointProfile | None:
    """The profile whose embedding model this campaign's passages use, or
    None; `campaign` is anything `client.endpoint_for` reads."""
    profile = endpoint_for(campaign)
    if not model_of(profile):
        return None
    return profile


def model_for(campaign) -> str:
    """The embedding model this campaign's passages should carry; "" for none."""
    return model_of(endpoint_for(campaign))


def to_bytes(vector: Sequence[float]) -> bytes:
    return np.asarray(vector, dtype=DTYPE).tobytes()


def from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype=DTYPE)


def embed(
    profile: EndpointProfile,
    texts: Sequence[str],
    *,
    batch_size: int = BATCH_SIZE,
    on_batch: Callable[[int], None] | None = None,
) -> Iterator[bytes]:
    """Yields each text's vector as float32 bytes, in order, one batch per request.

    `on_batch(done)` is called after each batch with the number embedded so
    far (the pipeline uses it for progress and its heartbeat).
    """
    model = model_of(profile)
    if localembed.is_local(model):
        yield from _embed_locally(model, texts, on_batch)
        return
    # No stream: the whole batch is the first byte, so it gets the total timeout.
    try:
        client = client_for(profile, timeout=profile.timeout_seconds)
    except ValidationError as exc:  # the allowlist no longer allows the profile's address
        raise EmbeddingFailed(describe(exc, profile, model=model)) from exc
    dimensions = None
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        try:
            # Naming the format (the client's own default) stops the client
            # decoding the reply itself, which crashes on a malformed one;
            # `_vectors` decodes it and says what is wrong instead.
            response = client.embeddings.create(model=model, input=batch, encoding_format="base64")
        except openai.OpenAIError as exc:
            raise _translate(exc, profile) from exc
        except httpx.HTTPError as exc:
            raise EmbeddingUnavailable(describe(exc, profile)) from exc
        except ValueError as exc:  # a body that is not valid JSON
            raise _unusable(profile, f"the reply could not be read ({exc})") from exc
        vectors = _vectors(response, profile)
        if len(vectors) != len(batch):
            raise EmbeddingFailed(
                f"The embedding model “{model}” returned {len(vectors)} vectors for {len(batch)} passages."
            )
        for vector in vectors:
            if dimensions is None:
                dimensions = vector.size
            if vector.size != dimensions:
                raise EmbeddingFailed(
                    f"The embedding model “{model}” returned vectors of differing sizes "
                    f"({dimensions} and {vector.size} numbers)."
                )
            yield vector.tobytes()
        if on_batch is not None:
            on_batch(start + len(batch))


def _embed_locally(model: str, texts: Sequence[str], on_batch: Callable[[int], None] | None) -> Iterator[bytes]:
    """The local backend, in its own batch size; not installed is a failure
    retrying will not fix (the source says so, and stays lexical)."""
    step = localembed.BATCH_SIZE
    for start in range(0, len(texts), step):
        try:
            vectors = localembed.encode(model, texts[start : start + step])
        except localembed.LocalUnavailable as exc:
            raise EmbeddingFailed(str(exc)) from exc
        for vector in vectors:
            yield vector.tobytes()
        if on_batch is not None:
            on_batch(start + len(vectors))


def _vectors(response: object, profile: EndpointProfile) -> list[np.ndarray]:
    """The reply's vectors in input order, each flat, finite float32.

    1. `data` must be a non-empty list; it is ordered by `index` when every
       item has an integer one, else taken as sent.
    2. Each item's `embedding` must be one vector per text: a list of numbers
       or base64 float32. A list of lists is one vector per token, from a
       server running without pooling, which needs its own advice.
    """
    data = getattr(response, "data", None)
    if not isinstance(data, list) or not data:
        raise _unusable(profile, "it holds no vectors")
    indexes = [getattr(item, "index", None) for item in data]
    if all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
        data = [item for _, item in sorted(zip(indexes, data, strict=True), key=lambda pair: pair[0])]
    return [_vector(getattr(item, "embedding", None), profile) for item in data]


def _vector(embedding: object, profile: EndpointProfile) -> np.ndarray:
    if embedding is None:
        raise _unusable(profile, "an item has no vector")
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except binascii.Error:
            raise _unusable(profile, "a vector is neither a list of numbers nor valid base64") from None
        if not raw or len(raw) % DTYPE.itemsize:
            raise _unusable(profile, f"a base64 vector is {len(raw)} bytes, not a whole number of float32 values")
        vector = np.frombuffer(raw, dtype=DTYPE)
    elif isinstance(embedding, list) and embedding and isinstance(embedding[0], list):
        raise EmbeddingFailed(
            f"The {_where(profile)} returned one vector per token, not one per text, for the embedding "
            f"model “{model_of(profile)}”: the server is running without pooling. {POOLING_ADVICE}"
        )
    elif not isinstance(embedding, list) or not embedding:
        raise _unusable(profile, f"a vector is {_kind(embedding)} instead of a list of numbers")
    elif not {type(value) for value in embedding} <= {float, int}:
        raise _unusable(profile, "a vector holds values that are not numbers")
    else:
        vector = np.asarray(embedding, dtype=DTYPE)
    if not np.isfinite(vector).all():
        raise _unusable(profile, "a vector holds values that are not finite numbers (NaN or infinity)")
    return vector


def _kind(value: object) -> str:
    kinds = {list: "an empty list", dict: "an object", bool: "a boolean", int: "a number", float: "a number"}
    return kinds.get(type(value), f"a value of type {type(value).__name__}")


def _unusable(profile: EndpointProfile, why: str) -> EmbeddingFailed:
    return EmbeddingFailed(
        f"The {_where(profile)} sent an unusable reply for the embedding model "
        f"“{model_of(profile)}”: {why}."
    )


def _where(profile: EndpointProfile) -> str:
    return f"model endpoint “{profile.name}”"


def _translate(exc: openai.OpenAIError, profile: EndpointProfile) -> Exception:
    """Temporary failures are retried with backoff; the rest fail the job now.
    The message is the reader's; what the server said goes to the log."""
    message = describe(exc, profile, model=model_of(profile))
    log.warning("Embedding with %s failed: %s Server: %s", profile.name, message, upstream_detail(exc))
    if isinstance(exc, openai.BadRequestError) and "pooling" in str(exc).lower():
        # llama-server refuses /v1/embeddings when pooling is off ("Pooling
        # type 'none' is not OAI compatible"), instead of sending token vectors.
        return EmbeddingFailed(f"{message} {POOLING_ADVICE}")
    return EmbeddingUnavailable(message) if is_temporary(exc) else EmbeddingFailed(message)


def for_retrieval(profile: EndpointProfile | None) -> dict:
    """What retrieval is handed to search semantically (as keyword
    arguments): the profile's embedding model and a function that embeds the
    scene's text; neither when the profile has no embedding model."""
    model = model_of(profile)
    if not model:
        return {"embedding_model": "", "embed_query": None}
    if localembed.is_local(model):
        return {"embedding_model": model, "embed_query": partial(_embed_query_locally, model)}

    def embed_query(text: str) -> tuple[np.ndarray | None, str]:
        """The query's vector, or None and why. Any failure costs only the
        semantic path, never the turn."""
        try:
            client = client_for(profile, timeout=min(float(profile.timeout_seconds), QUERY_EMBED_TIMEOUT))
            response = client.embeddings.create(model=model, input=[text], encoding_format="base64")
            return _vectors(response, profile)[0], ""
        except (EmbeddingFailed, EmbeddingUnavailable) as exc:
            return None, str(exc)
        except (openai.OpenAIError, httpx.HTTPError, ValidationError) as exc:
            return None, describe(exc, profile, model=model)
        except Exception as exc:  # a malformed reply: never the turn, and its text only in the log
            log.warning("The query embedding from %s failed: %s", profile.name, upstream_detail(exc))
            return None, f"the embedding model “{model}” sent a reply that could not be used ({type(exc).__name__})"

    return {"embedding_model": model, "embed_query": embed_query}


def _embed_query_locally(model: str, text: str) -> tuple[np.ndarray | None, str]:
    """The local backend's query vector, or None and why; never the turn."""
    try:
        return localembed.encode(model, [localembed.query_text(text)])[0], ""
    except localembed.LocalUnavailable as exc:
        return None, str(exc)
    except Exception as exc:  # PyTorch out of memory, a broken install
        return None, f"The local embedding model “{model}” failed: {type(exc).__name__}: {exc}"
