"""Passage vectors from the campaign's endpoint profile's embedding model.

Calls go through `storyapp.modelclient.client_for`, which re-checks the
endpoint allowlist at call time; failures are worded by its `describe`.
Vectors are stored as little-endian float32 bytes with the model's name, so
a query never meets a vector from another model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import httpx
import numpy as np
import openai

from storyapp.modelclient import client_for, describe
from storyapp.models import Campaign, EndpointProfile
from storyapp.prompting import endpoint_for

#: Passages per request: large enough to amortise the round trip, small
#: enough to stay under common request-size limits.
BATCH_SIZE = 64
DTYPE = np.dtype("<f4")


class EmbeddingUnavailable(Exception):
    """A temporary endpoint failure (unreachable, timeout, 429, 5xx): retry later."""


class EmbeddingFailed(Exception):
    """A failure retrying will not fix (bad key, unknown model, rejected input)."""


def profile_for(campaign: Campaign) -> EndpointProfile | None:
    """The profile whose embedding model this campaign's passages use, or None."""
    profile = endpoint_for(campaign)
    if profile is None or not profile.embedding_model.strip():
        return None
    return profile


def model_for(campaign: Campaign) -> str:
    """The embedding model this campaign's passages should carry; "" for none."""
    profile = profile_for(campaign)
    return profile.embedding_model.strip() if profile is not None else ""


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
    # No stream: the whole batch is the first byte, so it gets the total timeout.
    client = client_for(profile, timeout=profile.timeout_seconds)
    model = profile.embedding_model.strip()
    dimensions = None
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        try:
            response = client.embeddings.create(model=model, input=batch)
        except openai.OpenAIError as exc:
            raise _translate(exc, profile) from exc
        except httpx.HTTPError as exc:
            raise EmbeddingUnavailable(describe(exc, profile)) from exc
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch):
            raise EmbeddingFailed(
                f"The embedding model “{model}” returned {len(data)} vectors for {len(batch)} passages."
            )
        for item in data:
            vector = to_bytes(item.embedding)
            if dimensions is None:
                dimensions = len(vector) // DTYPE.itemsize
            if not dimensions or len(vector) != dimensions * DTYPE.itemsize:
                raise EmbeddingFailed(f"The embedding model “{model}” returned vectors of differing sizes.")
            yield vector
        if on_batch is not None:
            on_batch(start + len(batch))


def _translate(exc: openai.OpenAIError, profile: EndpointProfile) -> Exception:
    """Temporary failures are retried with backoff; the rest fail the job now."""
    where = f"the model endpoint “{profile.name}” ({profile.base_url})"
    if isinstance(exc, openai.NotFoundError):
        return EmbeddingFailed(
            f"{where} does not know the embedding model “{profile.embedding_model}” (404). "
            "Check the embedding model name on the endpoint profile."
        )
    if isinstance(exc, (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)):
        return EmbeddingUnavailable(describe(exc, profile))
    if isinstance(exc, openai.APIStatusError) and exc.status_code >= 500:
        return EmbeddingUnavailable(describe(exc, profile))
    return EmbeddingFailed(describe(exc, profile))
