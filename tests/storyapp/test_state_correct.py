"""The reader corrects the narrative state by hand on the play page; the
next prompt and the retrieval query read the correction, and a bad or stale
submission changes nothing."""

import pytest
from django.urls import reverse
from django.utils import timezone

from contextbuild import build_context
from contextbuild.narrative import NarrativeState
from endpoints.client import endpoint_for
from knowledge.query import assemble
from storyapp import prompting, services
from storyapp.forms import StateForm
from storyapp.models import Action
from tests.factories import CampaignFactory

HX = {"HTTP_HX_REQUEST": "true"}
OPENING = {
    "scene": {"summary": "Mara waits at the quay.", "location": "Westhaven harbour"},
    "entities": {"aldric": {"name": "Aldric", "status": "alive", "aliases": ["the harbourmaster"]}},
    "threads": {"seal": {"title": "Return the broken seal", "status": "open"}},
}
CORRECTED = {
    "summary": "Mara climbs the lighthouse stair.",
    "location": "the Greywater lighthouse",
    "inventory": "the broken seal\na tallow candle",
    "entities": "aldric: Aldric | dead | also: the harbourmaster | at: the customs house\n"
                "keeper: The lamp keeper | wary | holds: a brass key",
    "threads": "seal: Return the broken seal | resolved\nlamp: Relight the lamp",
}


@pytest.fixture
def campaign(alice, endpoint):
    return CampaignFactory(owner=alice, endpoint=endpoint, initial_state=OPENING)


@pytest.fixture
def reader(client, alice):
    client.force_login(alice)
    return client


def _state(campaign):
    campaign.refresh_from_db()
    return campaign.state_at(campaign.head)


def _shown(campaign) -> dict:
    """The form's fields as the page shows them now, ready to post back."""
    form = StateForm(state=_state(campaign))
    return {name: form.initial[name] for name in form.fields}


def _post(reader, campaign, changes, **extra):
    return reader.post(reverse("campaign_state", args=[campaign.pk]), {**_shown(campaign), **changes}, **extra)


def test_a_correction_is_in_the_next_prompt_and_the_retrieval_query(reader, campaign, play, model):
    model.script({"reply": "The tide turns.\n<state>{\"events\": []}</state>"})
    play("I wait.")
    response = _post(reader, campaign, CORRECTED, **HX)
    assert response.status_code == 200 and "Saved. The next turn reads it." in response.content.decode()
    state = _state(campaign)
    assert state["scene"]["location"] == "the Greywater lighthouse"
    assert state["entities"]["keeper"] == {"name": "The lamp keeper", "status": "wary", "items": ["a brass key"]}

    inputs = prompting.turn_inputs(campaign, endpoint_for(campaign), position=campaign.head)
    prompt = "\n".join(m["content"] for m in build_context(inputs).messages)
    for line in ("Location: the Greywater lighthouse", "You carry: the broken seal, a tallow candle",
                 "- Aldric [aldric] (dead; also called the harbourmaster; at the customs house)",
                 "- The lamp keeper [keeper] (wary; holds a brass key)", "- Relight the lamp [lamp]"):
        assert line in prompt
    assert "- Return the broken seal [seal]" not in prompt
    query = assemble(prompting.query_inputs(campaign, position=campaign.head, state=state))
    assert "greywater" in query.terms and "lighthouse" in query.terms

    model.script({"reply": "The stair winds up.\n<state>{\"events\": []}</state>"})
    _, narration = play("I climb.")
    assert "Location: the Greywater lighthouse" in narration.snapshot.messages[-1]["content"]


def test_a_story_with_no_action_yet_corrects_the_opening_state(reader, campaign):
    assert reader.post(reverse("campaign_state", args=[campaign.pk]), {**_shown(campaign), **CORRECTED}).status_code == 302
    campaign.refresh_from_db()
    assert campaign.head is None and campaign.initial_state["scene"]["location"] == "the Greywater lighthouse"
    page = reader.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert "Story state saved." in page and "keeper: The lamp keeper | wary | holds: a brass key" in page


def test_a_correction_at_a_failed_narration_reaches_the_turn_that_replaces_it(campaign, play, model):
    model.script({"reply": "The quay is quiet.\n<state>{\"events\": []}</state>"}, {"status": 500})
    play("I wait.")
    _, failed = play("I shout.")
    assert failed.status == Action.Status.FAILED
    document = {**OPENING, "scene": {"summary": "Night falls.", "location": "the lighthouse"}}
    services.state_correct(campaign=campaign, document=document)
    campaign.refresh_from_db()
    model.script({"reply": "The lamp gutters.\n<state>{\"events\": []}</state>"})
    _, narration = play("I shout again.")
    assert narration.parent.parent_id == failed.parent.parent_id
    assert "Location: the lighthouse" in narration.snapshot.messages[-1]["content"]


def test_a_line_left_as_shown_keeps_its_stored_record(reader, campaign):
    campaign.initial_state = {"entities": {"tam": {"name": "Tam | the elder", "items": ["a letter, sealed"]}}}
    campaign.save()
    assert _post(reader, campaign, {"summary": "Rain."}, **HX).status_code == 200
    assert _state(campaign) == {"scene": {"summary": "Rain."}, "entities": campaign.initial_state["entities"]}


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"entities": "The ferryman | paid"}, "should begin with an id and a colon"),
        ({"entities": "Old Tam: Tam"}, "“Old Tam” is not an id"),
        ({"entities": "tam:"}, "“tam” has no name"),
        ({"entities": "tam: Tam | wary | angry"}, "is a second status"),
        ({"entities": "tam: Tam\ntam: Tamsin"}, "the id “tam” is already used"),
        ({"entities": "you: Mara"}, "is the player character"),
        ({"threads": "seal: Return the seal | abandoned"}, "a thread is open or resolved"),
        ({"threads": "seal: Return it | open | soon"}, "at most “| resolved”"),
        ({"summary": "x" * 400}, "longer than 300 characters"),
    ],
)
def test_a_bad_submission_says_why_keeps_the_text_and_changes_nothing(reader, campaign, changes, error):
    before = _state(campaign)
    response = _post(reader, campaign, changes, **HX)
    page = response.content.decode()
    assert response.status_code == 400 and error in page
    [typed] = changes.values()
    assert typed.splitlines()[0].replace("“", "").split("|")[0].strip()[:20] in page
    assert _state(campaign) == before


def test_without_javascript_a_refusal_shows_the_whole_page_with_the_panel_open(reader, campaign):
    response = _post(reader, campaign, {"entities": "Old Tam: Tam"})
    page = response.content.decode()
    assert response.status_code == 400 and '<details id="state-panel" class="card state-panel" open' in page
    assert "Old Tam: Tam</textarea>" in page and "“Old Tam” is not an id" in page
    assert _state(campaign) == OPENING


def test_a_form_shown_before_the_state_moved_on_is_refused(reader, campaign, play, model):
    stale = _shown(campaign)
    model.script({"reply": "Aldric waves.\n<state>{\"events\": [{\"type\": \"move\", \"id\": \"you\", \"to\": \"the pier\"}]}</state>"})
    play("I wave.")
    response = reader.post(reverse("campaign_state", args=[campaign.pk]), {**stale, "summary": "Fog."}, **HX)
    page = response.content.decode()
    assert response.status_code == 400 and 'class="error refusal" role="alert"' in page
    assert "changed after this form was shown" in page and "Fog." in page
    assert _state(campaign)["scene"] == {"summary": "Mara waits at the quay.", "location": "the pier"}


def test_a_correction_is_refused_while_the_narrator_writes(reader, campaign):
    services.turn_submit(campaign=campaign, text="I wait.", now=timezone.now())
    before = _state(campaign)
    page = _post(reader, campaign, CORRECTED, **HX).content.decode()
    assert "The narrator is still writing" in page and 'id="state-save" disabled' in page
    assert _state(campaign) == before


def test_the_panel_shows_the_state_as_it_is_now(reader, campaign):
    page = reader.get(reverse("campaign_state", args=[campaign.pk]), **HX).content.decode()
    assert page.lstrip().startswith('<form id="state-form"')
    assert "aldric: Aldric | alive | also: the harbourmaster" in page and "Westhaven harbour" in page
    assert reader.get(reverse("campaign_state", args=[campaign.pk])).status_code == 302


def test_another_reader_cannot_see_or_correct_the_state(client, bob, campaign):
    client.force_login(bob)
    url = reverse("campaign_state", args=[campaign.pk])
    assert client.get(url, **HX).status_code == 404
    assert client.post(url, {**_shown(campaign), **CORRECTED}, **HX).status_code == 404
    assert _state(campaign) == OPENING


def test_the_form_reads_and_writes_the_same_document():
    form = StateForm({**CORRECTED, "based_on": ""}, state={})
    assert form.is_valid(), form.errors
    state, problems = NarrativeState.read(form.document())
    assert problems == ()
    assert StateForm(state=state.as_document()).initial["entities"] == CORRECTED["entities"].replace("\n", "\n\n")
