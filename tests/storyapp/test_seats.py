"""A shared story's seats: who sent each action, how the story shows and
exports it, what the narrator is told (the cast, the director's note), what
the narrative state keeps per seat, and how bundles carry seats."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from storyapp.bundle import BundleError
from storyapp.bundle.export import export
from storyapp.bundle.importer import import_bundle
from storyapp.models import Action, Campaign, ContextSnapshot
from tests.factories import MembershipFactory, UserFactory

QUIET = '\n<state>{"events": []}</state>'


@pytest.fixture
def tobin(bob, campaign):
    """Bob plays Tobin in Alice's campaign (Alice plays its persona, Mara)."""
    return MembershipFactory(campaign=campaign, user=bob, seat_name="Tobin", seat_description="A sellsword, tired.")


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def send(campaign, django_capture_on_commit_callbacks):
    """Sends a turn through the page as `user`, its narration run as a worker would."""

    def submit(user, text: str):
        with django_capture_on_commit_callbacks(execute=True):
            response = client_of(user).post(reverse("turn_submit", args=[campaign.pk]), {"text": text})
        assert response.status_code == 302
        campaign.refresh_from_db()
        return Action.objects.get(pk=campaign.head_id)

    return submit


def sent_to_model(model) -> list[list[dict]]:
    return [r["messages"] for r in model.requests() if r["path"].endswith("/chat/completions")]


def test_a_players_turn_is_stored_under_their_seat_and_the_game_masters_under_none(alice, bob, tobin, send, model):
    model.script({"reply": "The door groans." + QUIET}, {"reply": "Rain." + QUIET})
    narration = send(bob, "I open the door.")
    player = narration.parent
    assert (player.author, player.seat_name) == (bob, "Tobin")
    narration = send(alice, "I follow him in.")
    assert (narration.parent.author, narration.parent.seat_name) == (alice, "")


def test_a_narration_ends_where_the_model_starts_writing_a_players_turn(alice, bob, tobin, send, model):
    """SmolLM2, seen through the pages, went on with "Mara: ..." lines of its
    own: the narrator must never act for a player character."""
    model.script({"reply": "The door groans open.\nTobin: I step through and draw my blade." + QUIET})
    narration = send(alice, "I lift the lantern.")
    assert narration.text == "The door groans open."


def test_the_story_shows_each_action_under_its_seat_and_the_readers_own_as_you(alice, bob, tobin, send, campaign, model):
    model.script({"reply": "The door groans." + QUIET}, {"reply": "Rain." + QUIET})
    send(bob, "I open the door.")
    send(alice, "I follow him in.")
    as_alice = client_of(alice).get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert '<span class="who">Tobin</span>' in as_alice and '<span class="who">You</span>' in as_alice
    as_bob = client_of(bob).get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert '<span class="who">Tobin</span>' in as_bob and '<span class="who">Mara</span>' in as_bob
    assert '<span class="who">You</span>' not in as_bob


def test_a_lone_readers_actions_still_read_you(alice, play, campaign, model):
    model.script({"reply": "Gulls." + QUIET})
    play("I wait.")
    page = client_of(alice).get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert '<span class="who">You</span>' in page


def test_exports_attribute_each_action_to_its_seat(alice, bob, tobin, send, campaign, model):
    model.script({"reply": "The door groans." + QUIET}, {"reply": "Rain." + QUIET})
    send(bob, "I open the door.")
    send(alice, "I follow him in.")
    markdown = client_of(bob).get(reverse("story_export_markdown", args=[campaign.pk])).content.decode()
    assert "> **Tobin:**\n> I open the door." in markdown and "> **Mara:**\n> I follow him in." in markdown
    page = client_of(bob).get(reverse("story_export_html", args=[campaign.pk])).content.decode()
    assert "<strong>Tobin:</strong> I open the door." in page and "<strong>Mara:</strong> I follow him in." in page


def test_the_narrator_reads_the_seats_action_by_name_and_the_cast_rules(bob, tobin, send, model):
    model.script({"reply": "The door groans." + QUIET})
    send(bob, "I open the door.")
    [messages] = sent_to_model(model)
    system = messages[0]["content"]
    assert messages[-1]["role"] == "user" and messages[-1]["content"].endswith("Tobin: I open the door.")
    assert "- Tobin: A sellsword, tired." in system and "- Mara (the game master's character)" in system
    assert "Never decide, say or do anything for any of these characters" in system


def test_the_game_masters_action_at_a_shared_table_is_sent_as_the_persona(alice, tobin, send, model):
    model.script({"reply": "Rain." + QUIET})
    send(alice, "I follow him in.")
    [messages] = sent_to_model(model)
    assert messages[-1]["content"].endswith("Mara: I follow him in.")


def test_a_lone_readers_prompt_has_no_cast(play, model):
    model.script({"reply": "Gulls." + QUIET})
    _, narration = play("I wait.")
    [messages] = sent_to_model(model)
    assert "played by a group" not in messages[0]["content"] and messages[-1]["content"].split("\n\n")[-1] == "I wait."
    report = ContextSnapshot.objects.get(action=narration).report
    assert report["cast"] == [] and "cast" not in {s["label"] for s in report["sections"]}


def test_the_director_note_reaches_the_narrator_and_is_marked_for_the_game_master(bob, tobin, send, campaign, model):
    Campaign.objects.filter(pk=campaign.pk).update(director_note="The cellar hides the lost seal.")
    model.script({"reply": "The door groans." + QUIET})
    narration = send(bob, "I open the door.")
    [messages] = sent_to_model(model)
    assert "The cellar hides the lost seal." in messages[-1]["content"]
    report = ContextSnapshot.objects.get(action=narration).report
    [note] = [s for s in report["sections"] if s["label"] == "director_note"]
    assert note["audience"] == "gm" and "The cellar hides the lost seal." in note["text"]
    assert all("audience" not in s for s in report["sections"] if s["label"] != "director_note")
    assert [seat["name"] for seat in report["cast"]] == ["Tobin", "Mara"]
    page = client_of(campaign.owner).get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "Director&#x27;s note (game master only)" in page and "Who is present" in page


def test_build_context_json_carries_the_cast_and_the_director_note(tobin, campaign):
    Campaign.objects.filter(pk=campaign.pk).update(director_note="Let the rain start.")
    out = StringIO()
    call_command("build_context", campaign=campaign.pk, player_text="I look around.", json=True, stdout=out)
    report = json.loads(out.getvalue())
    assert report["cast"][0] == {"name": "Tobin", "description": "A sellsword, tired.", "game_master": False}
    labels = {s["label"]: s for s in report["sections"]}
    assert labels["director_note"]["audience"] == "gm" and "cast" in labels


def test_the_game_master_writes_the_director_note_on_the_campaign_form(alice, bob, tobin, campaign):
    page = client_of(alice).get(reverse("campaign_edit", args=[campaign.pk])).content.decode()
    assert 'name="director_note"' in page
    assert client_of(bob).get(reverse("campaign_edit", args=[campaign.pk])).status_code == 403


SEAT_EVENTS = (
    '\n<state>{"events": [{"type": "move", "seat": "Tobin", "to": "the cellar"}, '
    '{"type": "item", "seat": "tobin", "item": "a lamp", "change": "gained"}, '
    '{"type": "move", "seat": "Nobody", "to": "the roof"}]}</state>'
)


def test_the_state_keeps_where_each_seat_is_and_what_it_carries(alice, bob, tobin, send, campaign, model):
    model.script({"reply": "Down he goes." + SEAT_EVENTS})
    narration = send(bob, "I climb down.")
    assert narration.state["party"] == {"Tobin": {"location": "the cellar", "inventory": ["a lamp"]}}
    assert any("Nobody" in why for why in narration.state_rejections)
    panel = client_of(alice).get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert "Tobin | at: the cellar | carries: a lamp" in panel
    model.script({"reply": "Dark." + QUIET})
    send(bob, "I listen.")
    [_, second] = sent_to_model(model)
    assert "- Tobin (at the cellar; carries a lamp)" in second[-1]["content"]


def test_a_hand_correction_keeps_and_edits_the_party(alice, bob, tobin, send, campaign, model):
    model.script({"reply": "Down he goes." + SEAT_EVENTS})
    narration = send(bob, "I climb down.")
    response = client_of(alice).post(reverse("campaign_state", args=[campaign.pk]), {
        "summary": "", "location": "", "inventory": "", "entities": "", "threads": "",
        "party": "Tobin | at: the stair | carries: a lamp, a rope",
    })
    assert response.status_code == 302
    narration.refresh_from_db()
    assert narration.state["party"] == {"Tobin": {"location": "the stair", "inventory": ["a lamp", "a rope"]}}


def test_a_lone_readers_state_has_no_party_and_its_form_no_party_field(alice, play, campaign, model):
    model.script({"reply": "Gulls." + SEAT_EVENTS})
    _, narration = play("I wait.")
    assert "party" not in narration.state
    assert any("this story has no seats" in why for why in narration.state_rejections)
    page = client_of(alice).get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert 'name="party"' not in page


def test_a_bundle_carries_seats_and_attribution_but_no_account(alice, bob, tobin, send, campaign, model):
    MembershipFactory(campaign=campaign, user=UserFactory(username="wendy"), role="watcher", seat_name="")
    model.script({"reply": "The door groans." + QUIET})
    send(bob, "I open the door.")
    bundle = export(campaign)
    assert bundle["seats"] == [{"name": "Tobin", "description": "A sellsword, tired.", "role": "player"}]
    assert [a["seat_name"] for a in bundle["actions"] if a["kind"] == "player"] == ["Tobin"]
    text = json.dumps(bundle)
    assert "bob" not in text and "wendy" not in text

    carol = UserFactory(username="carol")
    imported = import_bundle(json.loads(text), owner=carol)
    assert imported.owner == carol and not imported.memberships.exists()
    assert imported.imported_seats == bundle["seats"]
    player = Action.objects.get(campaign=imported, kind="player")
    assert (player.seat_name, player.author) == ("Tobin", None)
    again = export(imported)
    assert again["seats"] == bundle["seats"] and [a["seat_name"] for a in again["actions"]] == [
        a["seat_name"] for a in bundle["actions"]
    ]


@pytest.mark.parametrize(
    ("seats", "message"),
    [
        ("Tobin", "bundle.seats should be list"),
        ([{"name": 7}], r"seats\[0\].name should be str"),
        ([{"name": "  "}], r"seats\[0\].name is empty"),
        ([{"name": "T" * 101}], "at most 100 characters"),
        ([{"name": "Tobin", "description": "x" * 2001}], "at most 2,000 characters"),
        ([{"name": "Tobin", "role": "gm"}], "player or watcher"),
        ([{"name": "Tobin"}, {"name": "Tobin"}], "share the name"),
        ([{"name": f"Seat {n}"} for n in range(51)], "at most 50"),
    ],
)
def test_a_bundle_with_malformed_seats_is_refused_and_writes_nothing(alice, seats, message):
    from tests.storyapp.test_bundle import EXAMPLE

    with pytest.raises(BundleError, match=message):
        import_bundle({**EXAMPLE, "seats": seats}, owner=alice)
    assert not Campaign.objects.exists()


def test_an_actions_seat_name_must_be_short_text(alice):
    from tests.storyapp.test_bundle import EXAMPLE

    actions = [{**EXAMPLE["actions"][0], "seat_name": ["Tobin"]}, EXAMPLE["actions"][1]]
    with pytest.raises(BundleError, match=r"actions\[0\].seat_name should be str"):
        import_bundle({**EXAMPLE, "actions": actions}, owner=alice)
    actions = [{**EXAMPLE["actions"][0], "seat_name": "T" * 101}, EXAMPLE["actions"][1]]
    with pytest.raises(BundleError, match="at most 100 characters"):
        import_bundle({**EXAMPLE, "actions": actions}, owner=alice)
    assert not Campaign.objects.exists()


def test_an_old_bundle_without_seats_imports_with_none(alice):
    from tests.storyapp.test_bundle import EXAMPLE

    imported = import_bundle(EXAMPLE, owner=alice)
    assert imported.imported_seats == []
    assert set(Action.objects.filter(campaign=imported).values_list("seat_name", flat=True)) == {""}
