"""Embeddings from a real server: llama-cpp-python started with embeddings on
and mean pooling gives one 576-wide vector a text (SmolLM2-135M's hidden
size), and `calibrate_embeddings` measures the model from it: it records a
floor, or refuses with the reason, whichever the measurement says."""

from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from endpoints import embeddings
from endpoints.models import EmbeddingCalibration

from .conftest import EMBEDDING_MODEL, HIDDEN_SIZE, profile_for


@pytest.fixture
def embedder(db, embedding_server):
    return profile_for(embedding_server, name="llama-cpp-python embeddings", embedding_model=EMBEDDING_MODEL)


def test_the_pooled_server_gives_one_576_wide_vector_a_text(embedder):
    texts = ["The tide runs high at the harbour.", "A courier rides the coast road.", "Salt."]
    vectors = [embeddings.from_bytes(v) for v in embeddings.embed(embedder, texts)]
    assert [v.shape for v in vectors] == [(HIDDEN_SIZE,)] * 3
    assert all(np.isfinite(v).all() and np.linalg.norm(v) > 0 for v in vectors)
    assert not np.allclose(vectors[0], vectors[2])


def test_calibrate_embeddings_measures_the_model_and_records_a_floor_or_says_why_not(embedder):
    out = StringIO()
    try:
        call_command("calibrate_embeddings", "--model", EMBEDDING_MODEL, "--endpoint", embedder.name, stdout=out)
    except CommandError as exc:
        refusal = str(exc)
    else:
        refusal = None
    output = out.getvalue()
    print(output, refusal or "")

    assert f"Model {EMBEDDING_MODEL} via {embedder.name}" in output
    assert "related" in output and "unrelated" in output
    calibration = EmbeddingCalibration.objects.filter(model=EMBEDDING_MODEL).first()
    if refusal is None:
        assert calibration is not None and 0 < calibration.floor < 1
        assert f"Recorded the floor for {EMBEDDING_MODEL}" in output
        assert calibration.related["pairs"] == 40 and calibration.unrelated["pairs"] == 40 * 39
    else:
        assert calibration is None
        assert "overlap" in refusal and "no floor" in refusal, refusal
    assert str(HIDDEN_SIZE) in output, "the command does not say how wide the model's vectors are"
