"""all-MiniLM-L6-v2 computed in the worker: its vectors, its shipped floor,
and semantic retrieval that finds what a scene means without its words."""

import os
from pathlib import Path

import numpy as np

from endpoints import calibration, localembed
from endpoints.embeddings import for_retrieval
from knowledge.models import KnowledgeEmbedding
from knowledge.query import QueryInputs
from knowledge.retrieval import retrieve

LORE = Path(__file__).parent.parent / "knowledge" / "evaluation_two_worlds" / "lore"
SALT_WRAITHS = (LORE / "salt_wraiths.md").read_text()

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


def test_a_scene_about_a_crystal_crusted_ghost_finds_the_salt_wraiths_by_meaning(local_campaign, library):
    library(local_campaign, SALT_WRAITHS, filename="wraiths.md")
    library(local_campaign, COOPERAGE, filename="cooperage.md")
    assert KnowledgeEmbedding.objects.filter(model=localembed.MINILM, chunk__source__original_filename="wraiths.md").exists()

    result = ask(local_campaign, GHOST_TEXT)

    assert result.semantic_used, result.semantic_note
    assert result.semantic_floor == calibration.floor_for(localembed.MINILM)
    found = {c.filename for c in result.candidates}
    assert found == {"wraiths.md"}
    best = result.candidates[0]
    assert best.admitted_by in ("semantic", "both") and best.cosine >= result.semantic_floor
    cooperage = [r for r in result.rejections if r.filename == "cooperage.md"]
    assert all("below the floor" in r.why for r in cooperage)


def test_a_near_duplicate_is_suppressed_by_its_vector(local_campaign, library):
    section = SALT_WRAITHS.split("\n## ")[1]
    retold = "# Marsh lore\n\n## " + section.replace("drowned", "drowned at sea", 1)
    library(local_campaign, "# The drowned dead\n\n## " + section, filename="wraiths.md")
    library(local_campaign, retold, filename="marsh-lore.md")

    result = ask(local_campaign, GHOST_TEXT)

    assert len(result.candidates) == 1 and len(result.suppressed) == 1
    assert result.suppressed[0].duplicate_of == result.candidates[0].chunk_id


def test_the_motto_is_a_hub_and_is_kept_out_of_a_scene_its_words_do_not_share(local_campaign, library):
    library(local_campaign, (LORE / "hub_motto.md").read_text(), filename="motto.md", classification="inspiration")
    library(local_campaign, SALT_WRAITHS, filename="wraiths.md")
    stored = KnowledgeEmbedding.objects.filter(chunk__source__original_filename="motto.md").get()
    assert stored.neutral_share is not None  # measured against the neutral scenes when it was stored

    scene = {"scene": {"summary": "A night crossing.", "location": "The deck of a cog"}, "entities": {}}
    result = ask(
        local_campaign,
        "The drowned are never returned by the ocean. All night the crew keeps the lanterns lit and watches "
        "the black depths below.",
        state=scene,
    )

    assert "motto.md" not in {c.filename for c in result.candidates}
    [motto] = [r for r in result.rejections if r.filename == "motto.md"]
    assert motto.cosine >= result.semantic_floor  # its meaning alone would have admitted it
    assert "it is a hub" in motto.why and "too short to be about one thing" in motto.why
