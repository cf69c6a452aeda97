"""The semantic path served by pgvector, on a PostgreSQL with the extension
(CI's `bin/pgvector-server`); skipped elsewhere. Its answers must be the
numpy path's: the same candidates with the same cosines, so admission
cannot differ between the two."""

import numpy as np
import pytest
from django.db import connection
from django.test import override_settings

from endpoints.embeddings import DTYPE, for_retrieval
from knowledge import lexical, pgvector, retrieval, services
from knowledge.models import KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from knowledge.query import QueryInputs
from knowledge.retrieval.library import SEMANTIC_CANDIDATES, library_for
from tests.factories import CampaignFactory, EndpointProfileFactory, KnowledgeSourceFactory
from tests.knowledge.lore import DRAGONS, HIDDEN_KEY, SCENE, WESTHAVEN, calibrate

pytestmark = pytest.mark.pgvector


@pytest.fixture(autouse=True)
def with_pgvector(db):
    if not pgvector.enabled():
        pytest.skip("this database has no pgvector (bin/pgvector-server starts one)")
    retrieval.clear_cache()
    yield
    retrieval.clear_cache()


@pytest.fixture
def fantasy(embedded_campaign, library, endpoint, model):
    calibrate(endpoint)
    library(embedded_campaign, WESTHAVEN, filename="westhaven.md")
    library(embedded_campaign, HIDDEN_KEY, filename="hidden-key.md", classification="canon", visibility="hidden")
    library(embedded_campaign, DRAGONS, filename="dragons.md", classification="inspiration")
    return embedded_campaign


def stored(campaign):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT chunk_id, model, dimensions FROM {pgvector.TABLE} WHERE campaign_id = %s", [campaign.pk])
        return set(cursor.fetchall())


def embeddings(campaign):
    return set(
        KnowledgeEmbedding.objects.filter(chunk__campaign=campaign).values_list("chunk_id", "model", "dimensions")
    )


def test_the_store_holds_exactly_the_campaigns_embeddings_through_index_reindex_and_delete(fantasy, library):
    assert stored(fantasy) == embeddings(fantasy) and len(stored(fantasy)) >= 3
    westhaven = fantasy.sources.get(original_filename="westhaven.md")
    services.source_reindex(source=westhaven)
    services.source_index_now(westhaven)
    assert stored(fantasy) == embeddings(fantasy)
    services.source_delete(source=fantasy.sources.get(original_filename="dragons.md"))
    assert stored(fantasy) == embeddings(fantasy)
    assert not any(model != "demo-embed" for _, model, _ in stored(fantasy))


def test_a_model_change_moves_the_store_to_the_new_model(fantasy, model, django_capture_on_commit_callbacks):
    other = EndpointProfileFactory(base_url=model.base_url, embedding_model="demo-embed-v2")
    with django_capture_on_commit_callbacks(execute=True):
        fantasy.endpoint = other
        fantasy.save()
    assert {m for _, m, _ in stored(fantasy)} == {"demo-embed-v2"}
    assert stored(fantasy) == embeddings(fantasy)


def test_retrieval_gives_the_numpy_paths_candidates_and_cosines(fantasy):
    scenes = [
        "A copper dragon swoops over the ridge and seizes the cattle at dusk.",
        "Smugglers bribe the lantern wardens at the sea gate.",
        "The bronze bells of the drowned temple ring at low water.",
    ]
    for scene in scenes:
        inputs = QueryInputs.build(state=SCENE, recent=[scene], persona_name="Mara")
        answers = []
        for on in (True, False):
            retrieval.clear_cache()
            with override_settings(LOREMASTER_PGVECTOR=on):
                assert isinstance(library_for(fantasy.pk, "demo-embed"), pgvector.Library) is on
                result = retrieval.retrieve(campaign_id=fantasy.pk, query=inputs, **for_retrieval(fantasy.endpoint))
            answers.append([(c.chunk_id, c.admitted_by, round(c.cosine or 0, 5)) for c in result.candidates])
        assert answers[0] == answers[1] and answers[0], scene


def _random_library(campaign, passages, rng, *, model="bench", width=384):
    source = KnowledgeSourceFactory(campaign=campaign, index_state=KnowledgeSource.IndexState.READY)
    lexical.insert(rows=[(source.pk, campaign.pk, i, "", f"passage {i}", 3) for i in range(passages)])
    ids = list(KnowledgeChunk.objects.filter(source=source).order_by("pk").values_list("pk", flat=True))
    vectors = rng.standard_normal((passages, width)).astype(DTYPE)
    blobs = [v.tobytes() for v in vectors]
    KnowledgeEmbedding.objects.bulk_create(
        KnowledgeEmbedding(chunk_id=i, model=model, dimensions=width, vector=b) for i, b in zip(ids, blobs, strict=True)
    )
    pgvector.store(ids, blobs, model)
    return source, ids, vectors


def test_the_nearest_are_the_campaigns_own_with_exact_cosines_and_can_come_from_its_hnsw_index(alice, monkeypatch):
    rng = np.random.default_rng(3)
    mine, theirs = CampaignFactory(owner=alice), CampaignFactory()
    source, ids, vectors = _random_library(mine, 3000, rng)
    _, their_ids, _ = _random_library(theirs, 3000, rng)
    query = vectors[17] + 0.05 * rng.standard_normal(384).astype(DTYPE)

    library = library_for(mine.pk, "bench")
    assert isinstance(library, pgvector.Library) and (library.size, library.dimensions) == (3000, 384)
    nearest = library.top(query, SEMANTIC_CANDIDATES)
    assert nearest[0][0] == ids[17] and len(nearest) == SEMANTIC_CANDIDATES
    assert not {i for i, _ in nearest} & set(their_ids)
    unit = query / np.linalg.norm(query)
    exact = {i: float(v @ unit / np.linalg.norm(v)) for i, v in zip(ids, vectors, strict=True)}
    assert all(abs(score - exact[i]) < 1e-5 for i, score in nearest)
    assert [s for _, s in nearest] == sorted((s for _, s in nearest), reverse=True)

    monkeypatch.setattr(pgvector, "EXACT_UP_TO", 1000)  # searched as a large campaign is: approximately
    approximate = library.top(query, SEMANTIC_CANDIDATES)
    assert approximate[0] == nearest[0] and len(approximate) == SEMANTIC_CANDIDATES
    assert not {i for i, _ in approximate} & set(their_ids)
    # Random 384-dimension vectors have no neighbourhoods, HNSW's worst
    # case, and each build draws its graph's levels afresh: eight builds
    # found 34-39 of the exact 40 (structured embeddings find more).
    assert len({i for i, _ in approximate} & {i for i, _ in nearest}) >= 0.75 * SEMANTIC_CANDIDATES

    # Under the settings of a large campaign's search, the query goes
    # through the index (its expression and predicate match); a campaign
    # this small is scanned exactly, through its campaign index.
    with connection.cursor() as cursor:
        cursor.execute(pgvector.APPROXIMATE)
        cursor.execute(
            f"EXPLAIN SELECT chunk_id FROM {pgvector.TABLE} WHERE campaign_id = %s AND model = 'bench' "
            "AND dimensions = 384 AND source_id = ANY(%s::bigint[]) ORDER BY embedding::vector(384) <=> %s::vector(384) LIMIT 40",
            [mine.pk, [source.pk], pgvector._literal(unit.astype(DTYPE).tobytes())],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"{pgvector.TABLE}_hnsw_384" in plan, plan


def test_a_new_width_gets_an_index_of_its_own(alice):
    _random_library(CampaignFactory(owner=alice), 20, np.random.default_rng(4), model="wide", width=768)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{pgvector.TABLE}_hnsw_768"])
        assert cursor.fetchone()[0]
