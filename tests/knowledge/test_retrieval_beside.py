"""The semantic path's embedding and cosines run beside the lexical search,
and never ask the database from there."""

import threading

import pytest
from django.db import connections

from endpoints.embeddings import for_retrieval
from knowledge import lexical
from knowledge.query import QueryInputs
from knowledge.retrieval import beside, retrieve
from knowledge.retrieval.library import library_for
from tests.knowledge.lore import SCENE, WESTHAVEN, calibrate

#: Long enough for a slow machine, short enough that a serial run fails soon.
OVERLAP_WAIT = 10


pytestmark = pytest.mark.usefixtures("fresh_retrieval_cache")


@pytest.fixture
def harbour(embedded_campaign, library, endpoint, model):
    calibrate(endpoint)
    library(embedded_campaign, WESTHAVEN, filename="westhaven.md")
    return embedded_campaign


def test_the_query_is_embedded_while_the_lexical_search_runs(harbour, monkeypatch):
    searching = threading.Event()
    embedded_on = []
    search = lexical.search

    def lexical_search(**kwargs):
        searching.set()
        return search(**kwargs)

    made = for_retrieval(harbour.endpoint)

    def embed_query(text):
        embedded_on.append(threading.get_ident())
        # Only a search begun before this embedding finishes sets it.
        assert searching.wait(OVERLAP_WAIT), "the lexical search waited for the query's embedding"
        return made["embed_query"](text)

    monkeypatch.setattr(lexical, "search", lexical_search)
    inputs = QueryInputs.build(state=SCENE, recent=["The harbour smells of tar."], persona_name="Mara")
    result = retrieve(
        campaign_id=harbour.pk, query=inputs, embedding_model=made["embedding_model"], embed_query=embed_query
    )
    assert embedded_on and embedded_on[0] != threading.get_ident()
    assert result.semantic_used and not result.semantic_note
    assert result.candidates, "the harbour scene finds the harbour passage"


def test_work_beside_the_turn_that_asks_the_database_is_refused_and_leaves_no_connection(harbour):
    handles = []

    def asks():
        handles.append(connections["default"])
        library_for(harbour.pk, harbour.endpoint.embedding_model)

    with pytest.raises(beside.NoQueriesHere):
        beside.beside(asks)()
    assert handles[0] is not connections["default"], "the work ran on a thread of its own"
    assert handles[0].connection is None, "the connection the refused query opened is closed"


def test_what_work_beside_the_turn_raises_reaches_the_turn():
    def fails():
        raise ValueError("the vector was malformed")

    waiting = beside.beside(fails)
    with pytest.raises(ValueError, match="malformed"):
        waiting()
