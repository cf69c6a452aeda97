"""What an embedding reply must be, and what each wrong one is called.

The real openai client talks to the loopback demo model server; its
`per_token` step answers as llama.cpp does without pooling, and `payload`
sends a malformed reply as it is.
"""

import base64
import struct

import numpy as np
import pytest

from endpoints import embeddings
from knowledge.models import IndexJob, KnowledgeEmbedding, KnowledgeSource

PER_TOKEN = "returned one vector per token, not one per text"
LORE = "# Westhaven\n\n## The Harbour\n\nThe old harbour smells of tar.\n\n## Tides\n\nTides run high."
LLAMA_SERVER_REFUSAL = "Pooling type 'none' is not OAI compatible. Please use a different pooling type"


def embed(profile, texts):
    return [embeddings.from_bytes(v) for v in embeddings.embed(profile, texts)]


def item(vector, index=0):
    return {"object": "embedding", "index": index, "embedding": vector}


def test_per_token_vectors_are_named_with_the_pooling_advice_not_as_differing_sizes(endpoint, model):
    model.script_embeddings({"per_token": True, "dimensions": 8})
    with pytest.raises(embeddings.EmbeddingFailed) as failed:
        embed(endpoint, ["The lighthouse keeper trims the wick.", "Tides run high."])
    message = str(failed.value)
    assert PER_TOKEN in message and "without pooling" in message
    assert "--embeddings --pooling mean" in message
    assert "--embedding true --kv_overrides ARCH.pooling_type=int:1" in message
    assert endpoint.name in message and "demo-embed" in message
    assert "differing sizes" not in message


def test_per_token_vectors_are_detected_for_a_single_one_token_text(endpoint, model):
    model.script_embeddings({"per_token": True, "dimensions": 8})
    with pytest.raises(embeddings.EmbeddingFailed, match=PER_TOKEN):
        embed(endpoint, ["Westhaven"])


def test_llama_server_refusing_to_embed_without_pooling_gets_the_same_advice(endpoint, model):
    model.script_embeddings({"status": 400, "message": LLAMA_SERVER_REFUSAL})
    with pytest.raises(embeddings.EmbeddingFailed) as failed:
        embed(endpoint, ["Tides run high."])
    assert "rejected the request (400)" in str(failed.value) and "--pooling mean" in str(failed.value)


def test_a_source_imported_against_a_server_without_pooling_goes_live_lexically_with_the_advice(
    embedded_campaign, model, library
):
    model.script_embeddings({"per_token": True, "dimensions": 8})
    source = library(embedded_campaign, LORE)
    assert source.index_state == KnowledgeSource.IndexState.READY
    assert source.error.startswith("Semantic search is off for this file:")
    assert PER_TOKEN in source.error and "--pooling mean" in source.error
    assert source.passage_count == 2 and not source.embedding_model
    assert not KnowledgeEmbedding.objects.exists()
    assert source.jobs.get(kind=IndexJob.Kind.INDEX).state == IndexJob.State.DONE
    assert not source.jobs.filter(kind=IndexJob.Kind.EMBED).exists(), "retrying will not add pooling"


@pytest.mark.parametrize(
    "payload, reason",
    [
        ({"object": "list", "data": []}, "it holds no vectors"),
        ({"object": "list"}, "it holds no vectors"),
        ([], "it holds no vectors"),
        ({"data": "vectors"}, "it holds no vectors"),
        ({"data": [1]}, "an item has no vector"),
        ({"data": [{"index": 0}]}, "an item has no vector"),
        ({"data": [item(["north", 1.0])]}, "a vector holds values that are not numbers"),
        ({"data": [item([1.0, None])]}, "a vector holds values that are not numbers"),
        ({"data": [item([1.0, float("nan")])]}, "not finite numbers"),
        ({"data": [item({"x": 1.0})]}, "a vector is an object instead of a list of numbers"),
        ({"data": [item(0.5)]}, "a vector is a number instead of a list of numbers"),
        ({"data": [item([])]}, "a vector is an empty list instead of a list of numbers"),
        ({"data": [item("not base64!")]}, "neither a list of numbers nor valid base64"),
        ({"data": [item(base64.b64encode(b"abc").decode())]}, "3 bytes, not a whole number of float32 values"),
        ('{"data": [', "the reply could not be read"),
        ("<html>Bad gateway</html>", "the reply could not be read"),
    ],
)
def test_a_malformed_reply_fails_with_its_reason_never_a_crash(endpoint, model, payload, reason):
    model.script_embeddings({"payload": payload})
    with pytest.raises(embeddings.EmbeddingFailed) as failed:
        embed(endpoint, ["Tides run high."])
    assert "sent an unusable reply for the embedding model “demo-embed”" in str(failed.value)
    assert reason in str(failed.value)


def test_a_malformed_reply_during_import_leaves_the_source_ready_lexically(embedded_campaign, model, library):
    model.script_embeddings({"payload": {"data": [item(["a", "b"]), item(["c", "d"], 1)]}})
    source = library(embedded_campaign, LORE)
    assert source.index_state == KnowledgeSource.IndexState.READY and source.passage_count == 2
    assert "values that are not numbers" in source.error and not KnowledgeEmbedding.objects.exists()


def test_too_few_vectors_and_vectors_of_differing_sizes_are_named(endpoint, model):
    model.script_embeddings(
        {"payload": {"data": [item([1.0, 0.0])]}},
        {"payload": {"data": [item([1.0, 0.0]), item([0.0, 1.0, 0.0], 1)]}},
    )
    with pytest.raises(embeddings.EmbeddingFailed, match="returned 1 vectors for 2 passages"):
        embed(endpoint, ["Tides", "Harbour"])
    with pytest.raises(embeddings.EmbeddingFailed, match=r"differing sizes \(2 and 3 numbers\)"):
        embed(endpoint, ["Tides", "Harbour"])


def test_vectors_come_back_in_input_order_as_floats_or_base64(endpoint, model):
    packed = base64.b64encode(struct.pack("<2f", 0.0, 1.0)).decode()
    model.script_embeddings({"payload": {"data": [item(packed, 1), item([1, 0.0], 0)]}})
    first, second = embed(endpoint, ["Tides", "Harbour"])
    assert first.tolist() == [1.0, 0.0] and second.tolist() == [0.0, 1.0]


def test_the_demo_servers_own_vectors_still_pass(endpoint, model):
    vectors = embed(endpoint, ["The harbour smells of tar.", "Tides run high."])
    assert all(np.isclose(np.linalg.norm(v), 1.0, atol=1e-5) for v in vectors)
