"""all-MiniLM-L6-v2 computed in the worker: its vectors, its shipped floor,
and semantic retrieval that finds what a scene means without its words."""

import os

import numpy as np

from knowledge import calibration, localembed
from knowledge.embeddings import for_retrieval
from knowledge.models import KnowledgeEmbedding
from knowledge.query import QueryInputs
from knowledge.retrieval import retrieve

SALT_WRAITHS = """# The drowned dead

## Salt wraiths

Sailors drowned in the brine flats do not always stay drowned. They rise as salt
wraiths: white shapes rimed in brine, cold as the sea bottom, that float inland on
misty nights. They crave heat above all things and gather at hearths and lanterns,
and a wraith that reaches a hearth smothers it and leaves the room white with salt.
"""

COOPERAGE = """# Trades of the lower town

## The cooperage

Master Ilse's cooperage makes the barrels for the herring fleet: oak staves, bent over
steam, bound with iron hoops. An apprentice spends three years on staves before he
is allowed to raise a cask.
"""

GHOST_SCENE = {
    "scene": {"summary": "Night on the marsh road.", "location": "A shepherd's hut"},
    "entities": {},
}
GHOST_TEXT = "A pale, crystal-crusted ghost drifts out of the fog toward the warmth of our fire."


def ask(campaign, text, state=GHOST_SCENE):
    inputs = QueryInputs.build(state=state, recent=[text], persona_name="")
    return retrieve(campaign_id=campaign.pk, query=inputs, **for_retrieval(campaign.endpoint))


def test_vectors_are_384_wide_unit_length_and_made_offline():
    vectors = localembed.encode(localembed.MINILM, ["The lighthouse keeper lights the lamp.", "A cask of herring."])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_the_model_is_calibrated_on_a_fresh_install_with_the_shipped_floor(db):
    shipped = calibration.shipped()[localembed.MINILM]
    assert calibration.floor_for(localembed.MINILM) == shipped["floor"]
    assert shipped["unrelated"]["p95"] < shipped["floor"] < shipped["related"]["p10"]


def test_a_scene_that_shares_no_words_with_a_passage_but_means_it_admits_it(local_campaign, library):
    library(local_campaign, SALT_WRAITHS, filename="wraiths.md")
    library(local_campaign, COOPERAGE, filename="cooperage.md")
    assert KnowledgeEmbedding.objects.filter(model=localembed.MINILM).count() == 2

    result = ask(local_campaign, GHOST_TEXT)

    assert result.semantic_used, result.semantic_note
    assert result.semantic_floor == calibration.floor_for(localembed.MINILM)
    [found] = result.candidates
    assert found.filename == "wraiths.md" and found.admitted_by == "semantic"
    assert found.cosine >= result.semantic_floor
    assert not found.matched_terms  # nothing in common but the meaning
    refused = {r.filename: r for r in result.rejections}
    assert "cooperage.md" not in {c.filename for c in result.candidates}
    if "cooperage.md" in refused:
        assert "below the floor" in refused["cooperage.md"].why


def test_a_near_duplicate_is_suppressed_by_its_vector(local_campaign, library):
    retold = SALT_WRAITHS.replace("# The drowned dead", "# Marsh lore").replace(
        "do not always stay drowned", "do not always stay dead"
    )
    library(local_campaign, SALT_WRAITHS, filename="wraiths.md")
    library(local_campaign, retold, filename="marsh-lore.md")

    result = ask(local_campaign, GHOST_TEXT)

    assert [c.filename for c in result.candidates] == ["wraiths.md"] or [
        c.filename for c in result.candidates
    ] == ["marsh-lore.md"]
    [duplicate] = result.suppressed
    assert duplicate.duplicate_of == result.candidates[0].chunk_id
