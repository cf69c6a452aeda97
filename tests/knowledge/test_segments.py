"""The library's vectors as segment files mapped from disk: written by the
worker at the swap, a cache of the database that is rebuilt when missing,
stale or damaged, never shared between databases, and giving the same
candidates and cosines as the vector rows."""

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge import retrieval, segments, selectors, services, termstats
from knowledge.models import KnowledgeEmbedding
from knowledge.retrieval.library import library_for
from tests.knowledge.lore import DRAGONS, HIDDEN_KEY, WESTHAVEN, calibrate

MODEL = "demo-embed"


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    settings.LOREMASTER_PGVECTOR = False  # the numpy path, whatever the database has
    retrieval.clear_cache()
    yield
    retrieval.clear_cache()


@pytest.fixture
def fantasy(embedded_campaign, library, endpoint, model, django_capture_on_commit_callbacks):
    calibrate(endpoint)
    with django_capture_on_commit_callbacks(execute=True):
        library(embedded_campaign, WESTHAVEN, filename="westhaven.md")
        library(embedded_campaign, HIDDEN_KEY, filename="hidden-key.md", classification="canon", visibility="hidden")
        library(embedded_campaign, DRAGONS, filename="dragons.md", classification="inspiration")
    return embedded_campaign


def from_rows(campaign_id):
    """The library as the vector rows give it: ids sorted, rows unit length."""
    rows = (
        KnowledgeEmbedding.objects.filter(model=MODEL, chunk__campaign_id=campaign_id)
        .order_by("chunk_id").values_list("chunk_id", "vector")
    )
    ids = np.asarray([pk for pk, _ in rows], dtype=np.int64)
    matrix = np.stack([np.frombuffer(bytes(v), dtype=np.float32) for _, v in rows])
    return ids, matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def segment_files():
    return sorted(segments.database_dir().glob("*/*/*.seg"))


def fresh_process():
    retrieval.clear_cache()


def test_the_worker_writes_segments_at_the_swap_so_a_fresh_process_reads_no_vector_rows(fantasy):
    assert len(segment_files()) == 3
    fresh_process()
    with CaptureQueriesContext(connection) as queries:
        loaded = library_for(fantasy.pk, MODEL)
    assert loaded.size == KnowledgeEmbedding.objects.filter(chunk__campaign=fantasy).count()
    table = KnowledgeEmbedding._meta.db_table
    assert not [q["sql"] for q in queries if table in q["sql"]]
    assert len(list((segments.database_dir() / "terms").glob(f"{fantasy.pk}-*.json"))) == 1  # counted after the last swap


def test_mapped_segments_give_the_same_candidates_and_cosines_as_the_vector_rows(fantasy):
    ids, matrix = from_rows(fantasy.pk)
    loaded = library_for(fantasy.pk, MODEL)
    assert loaded.chunk_ids.tolist() == ids.tolist()
    query = matrix[0] + 0.5 * matrix[-1]
    expected = matrix @ (query / np.linalg.norm(query))
    top = loaded.top(query, 40)
    assert [pk for pk, _ in top] == ids[np.argsort(-expected, kind="stable")].tolist()
    np.testing.assert_allclose([s for _, s in top], np.sort(expected)[::-1], rtol=1e-6)
    vectors = loaded.vectors_for(ids.tolist())
    np.testing.assert_array_equal(np.stack([vectors[int(pk)][0] for pk in ids]), loaded.matrix)

    for path in segment_files():
        path.unlink()
    fresh_process()
    rebuilt = library_for(fantasy.pk, MODEL)
    assert rebuilt.top(query, 40) == top
    assert len(segment_files()) == 3  # rebuilt from the rows, and kept


def test_a_reindex_or_a_delete_leaves_no_stale_segment_in_use(fantasy, django_capture_on_commit_callbacks):
    dragons = fantasy.sources.get(original_filename="dragons.md")
    before = set(segment_files())
    library_for(fantasy.pk, MODEL)
    with django_capture_on_commit_callbacks(execute=True):
        services.source_index_now(dragons)
    after = set(segment_files())
    assert len(after) == 3 and len(before - after) == 1  # the old revision's file unlinked
    ids, _ = from_rows(fantasy.pk)
    assert library_for(fantasy.pk, MODEL).chunk_ids.tolist() == ids.tolist()

    with django_capture_on_commit_callbacks(execute=True):
        services.source_delete(source=dragons)
    assert not [p for p in segment_files() if p.parent.name == str(dragons.pk)]
    fresh_process()
    assert dragons.pk not in library_for(fantasy.pk, MODEL).source_ids


def test_a_segment_left_from_an_older_revision_is_never_read(fantasy):
    dragons = fantasy.sources.get(original_filename="dragons.md")
    (old,) = [p for p in segment_files() if p.parent.name == str(dragons.pk)]
    kept = old.read_bytes()
    dragons.save()  # a new version of the row, its segment not written yet
    old.write_bytes(kept)
    fresh_process()
    ids, _ = from_rows(fantasy.pk)
    assert library_for(fantasy.pk, MODEL).chunk_ids.tolist() == ids.tolist()
    assert len([p for p in segment_files() if p.parent.name == str(dragons.pk)]) == 1


@pytest.mark.parametrize("damage", ["truncate", "garble", "empty"])
def test_a_damaged_segment_is_rebuilt_and_the_turn_goes_on(fantasy, damage):
    expected = library_for(fantasy.pk, MODEL).top(from_rows(fantasy.pk)[1][0], 40)
    path = segment_files()[0]
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garble": b"x" * len(data), "empty": b""}[damage])
    fresh_process()
    assert library_for(fantasy.pk, MODEL).top(from_rows(fantasy.pk)[1][0], 40) == expected
    assert path.read_bytes() == data


def test_two_databases_never_share_segment_files(fantasy):
    here = segments.database_dir()
    name = connection.settings_dict["NAME"]
    connection.settings_dict["NAME"] = f"{name}-another"
    try:
        elsewhere = segments.database_dir()
        fresh_process()
        assert library_for(fantasy.pk, MODEL).size  # built from this database's rows, into its own directory
    finally:
        connection.settings_dict["NAME"] = name
    assert here != elsewhere and len(list(elsewhere.glob("*/*/*.seg"))) == 3


def test_word_counts_are_kept_for_a_fresh_process(fantasy):
    stamp = selectors.library_stamp(fantasy.pk)[0]
    counted = termstats.profile_for(fantasy.pk, stamp)
    fresh_process()
    with CaptureQueriesContext(connection) as queries:
        again = termstats.profile_for(fantasy.pk, stamp)
    assert again.counts == counted.counts and (again.passages, again.sampled) == (counted.passages, counted.sampled)
    assert not [q["sql"] for q in queries if "knowledge_knowledgechunk" in q["sql"]]


def test_a_library_of_many_sources_is_mapped_from_one_merged_file_of_its_revision(
    fantasy, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(segments, "MERGE_ABOVE", 1)
    query = from_rows(fantasy.pk)[1][0]
    expected = library_for(fantasy.pk, MODEL).top(query, 40)
    (merged,) = segments.database_dir().glob("*/*.lib")
    for path in segment_files():
        path.unlink()
    fresh_process()
    assert library_for(fantasy.pk, MODEL).top(query, 40) == expected  # from the merged file alone
    assert not segment_files()

    with django_capture_on_commit_callbacks(execute=True):
        services.source_index_now(fantasy.sources.get(original_filename="dragons.md"))
    fresh_process()
    ids, _ = from_rows(fantasy.pk)
    assert library_for(fantasy.pk, MODEL).chunk_ids.tolist() == ids.tolist()  # the old merged file is not this revision's
    (again,) = segments.database_dir().glob("*/*.lib")
    assert again != merged
