"""Every turn is shown its library's passages: through the lineage only,
surviving a dead embedding endpoint, and inspectable after the source is gone."""

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge import services as knowledge_services
from storyapp import prompting, services
from storyapp.models import Action
from tests.factories import CampaignFactory
from tests.knowledge.lore import HIDDEN_KEY, SCENE, WESTHAVEN, calibrate


pytestmark = pytest.mark.usefixtures("fresh_retrieval_cache")


@pytest.fixture
def campaign(alice, endpoint, model):
    calibrate(endpoint)
    campaign = CampaignFactory(owner=alice, endpoint=endpoint, initial_state=SCENE)
    for filename, text, options in (
        ("westhaven.md", WESTHAVEN, {}),
        ("hidden-key.md", HIDDEN_KEY, {"classification": "canon", "visibility": "hidden"}),
    ):
        source = knowledge_services.source_create(
            campaign=campaign, filename=filename, text=text, enqueue=False, **options
        )
        knowledge_services.source_index_now(source)
    model.reset()
    return campaign


@pytest.fixture
def play_scripted(campaign, model, django_capture_on_commit_callbacks):
    """`play` with the model's reply scripted; returns the narration."""

    def turn(text: str, reply: str = "The gulls cry over the water.") -> Action:
        model.script({"reply": reply})
        with django_capture_on_commit_callbacks(execute=True):
            _, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
        narration.refresh_from_db()
        return narration

    return turn


def test_a_turn_is_shown_the_matching_passage_with_its_provenance(play_scripted, model):
    narration = play_scripted("I follow the smugglers past the lantern wardens to the sea gate.")
    knowledge = narration.snapshot.report["knowledge"]
    used = knowledge["used"][0]
    assert used["filename"] == "westhaven.md" and used["heading_path"].endswith("The harbour") and "lantern wardens" in used["text"]
    assert "hidden-key.md" not in {p["filename"] for p in knowledge["used"]}
    [chat] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    prompt = "\n".join(m["content"] for m in chat["messages"])
    assert f"[westhaven.md · {used['heading_path']} · passage {used['chunk_index'] + 1}]" in prompt
    assert any(r["path"] == "/v1/embeddings" for r in model.requests())


def test_off_lineage_turns_never_reach_the_query(campaign, play_scripted, model, django_capture_on_commit_callbacks):
    play_scripted("I study the zeppelinmoor charts.", "The zeppelinmoor charts are old.")
    play_scripted("I burn the quillfeather ledger.", "The quillfeather ledger burns.")
    with django_capture_on_commit_callbacks(execute=True):
        services.turn_undo(campaign=campaign, now=timezone.now())
    model.reset()
    narration = play_scripted("I wait on the quay.")
    terms = narration.snapshot.report["knowledge"]["terms"]
    assert "zeppelinmoor" in terms and "quillfeather" not in terms
    [embedded] = [r for r in model.requests() if r["path"] == "/v1/embeddings"]
    assert "quillfeather" not in " ".join(embedded["input"])
    campaign.refresh_from_db()
    inputs = prompting.query_inputs(campaign, position=campaign.head, state=SCENE)
    assert not any("quillfeather" in text for text in inputs.recent)


def test_a_dead_embedding_endpoint_costs_the_semantic_half_and_the_turn_still_narrates(play_scripted, model):
    model.script_embeddings({"status": 500})
    narration = play_scripted("I follow the smugglers past the lantern wardens to the sea gate.")
    assert narration.status == Action.Status.DONE and narration.text == "The gulls cry over the water."
    knowledge = narration.snapshot.report["knowledge"]
    assert not knowledge["semantic_used"] and "unavailable" in knowledge["semantic_note"]
    assert knowledge["used"] and {p["admitted_by"] for p in knowledge["used"]} == {"lexical"}


def test_the_inspector_still_shows_the_passage_after_its_source_is_deleted(campaign, play_scripted, client):
    narration = play_scripted("I follow the smugglers past the lantern wardens to the sea gate.")
    knowledge_services.source_delete(source=campaign.sources.get(original_filename="westhaven.md"))
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "Smugglers bribe" in page and "westhaven.md" in page
    assert "over the knowledge budget" not in page


def test_the_inspector_diff_names_passages_that_entered_and_left(campaign, play_scripted, client):
    play_scripted("I follow the smugglers past the lantern wardens to the sea gate.")
    second = play_scripted("Quarterly invoices reconcile the procurement ledger.")
    second_knowledge = second.snapshot.report["knowledge"]
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, second.pk])).content.decode()
    if not second_knowledge["used"]:
        assert "westhaven.md · passage" in page
