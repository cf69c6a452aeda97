"""Retrieval: admission on absolute signals, ranking among survivors,
suppression within a class, the library cache, and the retrieve command."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from endpoints.embeddings import for_retrieval
from knowledge import services
from knowledge.query import QueryInputs
from knowledge.retrieval import retrieve
from knowledge.retrieval.library import library_for
from tests.factories import CampaignFactory
from tests.knowledge.lore import DRAGONS, HIDDEN_KEY, SCENE, WESTHAVEN, calibrate


pytestmark = pytest.mark.usefixtures("fresh_retrieval_cache")


@pytest.fixture
def calibrated(endpoint, model):
    calibrate(endpoint)
    model.clear_requests()


@pytest.fixture
def fantasy(embedded_campaign, library, calibrated):
    library(embedded_campaign, WESTHAVEN, filename="westhaven.md")
    library(embedded_campaign, HIDDEN_KEY, filename="hidden-key.md", classification="canon", visibility="hidden")
    library(embedded_campaign, DRAGONS, filename="dragons.md", classification="inspiration")
    return embedded_campaign


def ask(campaign, *recent, state=None, persona="Mara"):
    inputs = QueryInputs.build(state=SCENE if state is None else state, recent=list(recent), persona_name=persona)
    return retrieve(campaign_id=campaign.pk, query=inputs, **for_retrieval(campaign.endpoint))


def files(result):
    return sorted({c.filename for c in result.candidates})


def test_a_query_about_tide_tables_and_container_tonnage_retrieves_nothing(fantasy):
    state = {
        "scene": {"summary": "The port office posts the tide tables.", "location": "Container terminal"},
        "entities": {},
    }
    result = ask(
        fantasy,
        "You compare the tide tables with the container tonnage manifest for berth four.",
        "The crane operator reports the gross tonnage of each container ship in metric tonnes.",
        state=state,
        persona="",
    )
    assert result.semantic_used and result.semantic_calibrated
    assert result.candidates == () and result.suppressed == ()
    assert result.considered == 0 and result.rejected == result.generated


def test_a_harbour_scene_retrieves_the_harbour_passage(fantasy):
    result = ask(fantasy, "You follow the smugglers past the lantern wardens toward the sea gate.")
    top = result.candidates[0]
    assert top.filename == "westhaven.md" and top.heading_path.endswith("The harbour")
    assert top.admitted_by in ("lexical", "both") and {"smugglers", "lantern"} <= set(top.matched_terms)
    assert top.relevance > 0 and top.score > 0 and "smugglers" in result.terms
    assert "dragons.md" not in files(result)


def test_a_hidden_file_is_never_admitted_on_the_protagonists_name_alone(campaign, library):
    library(campaign, HIDDEN_KEY, filename="hidden-key.md", classification="canon", visibility="hidden")
    library(campaign, WESTHAVEN, filename="westhaven.md")
    result = ask(campaign, "Mara buys bread and counts her coins.", "Aldric the harbourmaster shrugs at Mara.")
    assert "hidden-key.md" not in files(result)
    admitted_on_more = ask(campaign, "Mara asks Aldric about the vault key under the floorboards.")
    assert "hidden-key.md" in files(admitted_on_more)


def test_a_library_with_nothing_matching_supplies_nothing(fantasy):
    result = ask(fantasy, "Quarterly invoices reconcile the procurement ledger.", state={}, persona="")
    assert result.candidates == ()


def test_the_class_orders_what_matched_but_never_rescues_what_did_not(embedded_campaign, library, calibrated):
    library(embedded_campaign, DRAGONS, filename="dragons.md", classification="inspiration")
    library(
        embedded_campaign,
        "# Dragons\n\nCopper dragons of the Vale of Ash hunt cattle at dusk on the high ridges.\n",
        filename="canon-dragons.md",
        classification="canon",
    )
    library(embedded_campaign, "# Law\n\nThe magistrate brands forgers of guild seals.\n", filename="law.md",
            classification="canon")
    result = ask(embedded_campaign, "A copper dragon swoops over the ridge and seizes the cattle at dusk.",
                 state={}, persona="")
    assert [c.filename for c in result.candidates] == ["canon-dragons.md", "dragons.md"]
    assert result.candidates[0].score > result.candidates[1].score
    assert "law.md" not in files(result)


def test_always_included_canon_is_offered_whatever_the_scene(campaign, library):
    library(campaign, "# Rules\n\nMagic costs blood.\n", filename="rules.md", classification="canon",
            always_include=True)
    result = ask(campaign, "Quarterly invoices reconcile the procurement ledger.", state={}, persona="")
    [rule] = result.candidates
    assert rule.always_include and rule.admitted_by == "always" and rule.filename == "rules.md"


def test_identical_passages_are_suppressed_within_a_class_only(campaign, library):
    text = "Smugglers bribe the lantern wardens at the sea gate of Westhaven."
    library(campaign, f"# Harbour\n\n{text}\n", filename="a.md")
    library(campaign, f"# Harbour notes\n\n{text}\n", filename="b.md")
    library(campaign, f"# Harbour canon\n\n{text}\n", filename="c.md", classification="canon")
    result = ask(campaign, "The smugglers bribe the lantern wardens.")
    assert sorted(c.filename for c in result.candidates) == ["a.md", "c.md"] or sorted(
        c.filename for c in result.candidates
    ) == ["b.md", "c.md"]
    [duplicate] = result.suppressed
    kept = {c.chunk_id: c for c in result.candidates}
    assert kept[duplicate.duplicate_of].classification == duplicate.classification == "reference"


def test_near_duplicates_by_cosine_are_suppressed_when_vectors_exist(fantasy, library):
    library(fantasy, WESTHAVEN.replace("day and night", "night and day"), filename="westhaven-copy.md")
    result = ask(fantasy, "You follow the smugglers past the lantern wardens toward the sea gate.")
    suppressed = [c for c in result.suppressed if c.heading_path.endswith("The harbour")]
    assert len(suppressed) == 1 and suppressed[0].duplicate_of is not None


def test_only_enabled_ready_sources_of_the_campaign_are_searched(alice, endpoint, campaign, library):
    other = CampaignFactory(owner=alice, endpoint=campaign.endpoint)
    library(other, WESTHAVEN, filename="elsewhere.md")
    disabled = library(campaign, WESTHAVEN, filename="westhaven.md")
    services.source_update(source=disabled, title=disabled.title, classification="reference",
                           visibility="visible", always_include=False, enabled=False)
    assert ask(campaign, "The smugglers bribe the lantern wardens.").candidates == ()


def test_the_library_cache_follows_sources_added_disabled_and_deleted(fantasy, library):
    scene = "A copper dragon swoops over the ridge and seizes the cattle at dusk."
    first = library_for(fantasy.pk, "demo-embed")
    assert library_for(fantasy.pk, "demo-embed") is first  # unchanged library: the cached matrix
    before = ask(fantasy, scene, state={}, persona="")
    assert files(before) == ["dragons.md"] and before.candidates[0].admitted_by == "both"

    added = library(fantasy, "# Wyrms\n\nCopper wyrms seize cattle at dusk above the ridge.\n", filename="wyrms.md")
    assert library_for(fantasy.pk, "demo-embed") is not first
    assert "wyrms.md" in files(ask(fantasy, scene, state={}, persona=""))

    services.source_update(source=added, title=added.title, classification="reference",
                           visibility="visible", always_include=False, enabled=False)
    assert "wyrms.md" not in files(ask(fantasy, scene, state={}, persona=""))

    dragons = fantasy.sources.get(original_filename="dragons.md")
    passages = list(dragons.chunks.values_list("pk", flat=True))
    assert library_for(fantasy.pk, "demo-embed").vectors_for(passages)
    services.source_delete(source=dragons)
    assert "dragons.md" not in files(ask(fantasy, scene, state={}, persona=""))
    assert not library_for(fantasy.pk, "demo-embed").vectors_for(passages)


def test_a_reindex_committed_with_an_older_clock_still_refreshes_the_cache(fantasy):
    """Two workers can commit in the other order than they read the clock."""
    from datetime import timedelta

    from django.utils import timezone

    first = library_for(fantasy.pk, "demo-embed")
    dragons = fantasy.sources.get(original_filename="dragons.md")
    fantasy.sources.exclude(pk=dragons.pk).update(updated=timezone.now() + timedelta(hours=1))
    first = library_for(fantasy.pk, "demo-embed")
    services.source_index_now(dragons)
    assert library_for(fantasy.pk, "demo-embed") is not first


def test_the_semantic_path_scores_the_whole_library(fantasy, library):
    for n in range(30):
        library(fantasy, f"# Filler {n}\n\nLedger entry {n} for barley and rope.\n", filename=f"filler-{n}.md")
    loaded = library_for(fantasy.pk, "demo-embed")
    assert loaded.size == fantasy.sources.get(original_filename="westhaven.md").passage_count + 2 + 30


def test_a_dead_embedding_endpoint_costs_only_the_semantic_half(fantasy, model):
    model.script_embeddings({"status": 503})
    result = ask(fantasy, "You follow the smugglers past the lantern wardens toward the sea gate.")
    assert not result.semantic_used and "unavailable" in result.semantic_note and "503" in result.semantic_note
    assert files(result) == ["westhaven.md"] and result.candidates[0].admitted_by == "lexical"


def test_the_retrieve_command_prints_ranked_candidates_and_decisions(fantasy, library):
    fantasy.initial_state = SCENE
    fantasy.save()
    out = StringIO()
    call_command("retrieve", "--campaign", str(fantasy.pk), "--player-text",
                 "I follow the smugglers past the lantern wardens to the sea gate.", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["candidates"][0]["filename"] == "westhaven.md"
    assert report["semantic"]["calibrated"] and report["semantic"]["model"] == "demo-embed"
    admitted = [d for d in report["decisions"] if d["admitted"]]
    rejected = [d for d in report["decisions"] if not d["admitted"]]
    assert admitted[0]["rank"] == 1 and admitted[0]["admitted_by"]
    assert rejected and all(d["why"] for d in rejected)
    assert report["generated"] == len(report["decisions"])


def test_a_hidden_file_is_not_admitted_by_cosine_carried_by_standing_names(fantasy):
    result = ask(fantasy, "Mara buys bread and counts her coins.", "Aldric the harbourmaster shrugs at Mara.")
    assert result.semantic_used
    assert "hidden-key.md" not in files(result)


def test_a_lorebook_passage_the_semantic_path_admits_goes_to_world_info_never_to_the_passages(
    embedded_campaign, calibrated
):
    harbour = {"uid": 0, "comment": "The harbour", "key": ["zzyzx"], "vectorized": True,
               "content": "Westhaven harbour shelters the salt fleet behind a granite breakwater. Smugglers bribe "
                          "the lantern wardens at the sea gate, and the quay is watched day and night. "
                          # Long enough for meaning alone: a passage under knowledge.hubs.SHORT_TOKENS is a hub.
                          "Merchants haggle over salt and rope on the quay while the harbour wardens count "
                          "the ships that come in past the breakwater with the evening tide."}
    book = json.dumps({"entries": {"0": harbour}}).encode()
    [source] = services.sources_import(campaign=embedded_campaign, files=[("harbour.json", book)], enqueue=False).created
    services.source_index_now(source)
    result = ask(embedded_campaign, "Mara haggles with the smugglers on the quay of Westhaven harbour.")
    [chunk] = source.chunks.values_list("pk", flat=True)
    assert result.semantic_used
    assert chunk in result.lore_by_meaning
    assert not result.candidates and not any(r.title == source.title for r in result.rejections)
