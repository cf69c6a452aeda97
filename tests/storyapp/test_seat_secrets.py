"""Secrets per seat: lore and whispers known to one character, told to the
narrator as such, and an inspector that shows each member only what their
seat may see; a narration that repeats a secret is flagged for the game master."""

import pytest
from django.db.models import F
from django.urls import reverse

from knowledge import services as knowledge_services
from knowledge.models import KnowledgeSource, LoreEntry
from storyapp import campaignevents
from storyapp.access import place_in
from storyapp.models import CampaignEvent, Whisper
from tests.factories import MembershipFactory, UserFactory, world_info_book

CRYPT = "The abbot buried the silver crown beneath the third pillar of the crypt."
MARA = "Mara was born in the drowned village and still hears its bells at night."
WHISPER = "Ivo notices a fresh scratch on the abbot's lantern hook."
LEAKING = "The wind turns. Mara was born in the drowned village and still hears its bells, they say."


@pytest.fixture
def members(campaign):
    return {
        "carol": MembershipFactory(campaign=campaign, user=UserFactory(username="carol"), seat_name="Ivo").user,
        "erin": MembershipFactory(campaign=campaign, user=UserFactory(username="erin"), seat_name="Mara").user,
        "dave": MembershipFactory(campaign=campaign, user=UserFactory(username="dave"), role="watcher",
                                  seat_name="").user,
    }


@pytest.fixture
def secrets(campaign, members, library, client):
    library(campaign, CRYPT, filename="crypt.md", classification="canon", visibility="hidden", always_include=True)
    mara = library(campaign, MARA, filename="mara.md")
    KnowledgeSource.objects.filter(pk=mara.pk).update(secret_seat="Mara")
    client.force_login(campaign.owner)
    client.post(reverse("whisper_send", args=[campaign.pk]), {"seat_name": "Ivo", "text": WHISPER})
    client.logout()


@pytest.fixture
def narration(secrets, play, model):
    model.reset()
    model.script({"reply": LEAKING})
    _, narration = play("I step into the crypt.")
    return narration


def _inspector(client, user, campaign, narration) -> str:
    client.force_login(user)
    response = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _escaped(text: str) -> str:
    return text.replace("'", "&#x27;")


def test_the_narrator_is_told_each_secret_as_known_only_to_its_character(narration, model):
    [chat] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    system = chat["messages"][0]["content"]
    assert "Known only to Mara:" in system and MARA in system
    assert "Known only to Ivo:" in system and WHISPER in system and CRYPT in system
    audiences = {s.get("audience") for s in narration.snapshot.report["sections"]}
    assert {"Mara", "Ivo"} <= audiences


def test_a_seat_secret_source_is_not_searched_as_lore(narration):
    used = narration.snapshot.report["knowledge"]["used"]
    assert "mara.md" not in {p["filename"] for p in used}


@pytest.mark.parametrize(("member", "sees", "never"), [
    ("carol", [WHISPER], [CRYPT, MARA]),
    ("erin", [MARA], [CRYPT, WHISPER]),
    ("dave", [], [CRYPT, MARA, WHISPER]),
])
def test_each_member_inspector_shows_only_what_their_seat_may_see(
    client, campaign, members, narration, member, sees, never,
):
    page = _inspector(client, members[member], campaign, narration)
    for text in sees:
        assert _escaped(text) in page
    for text in never:
        assert _escaped(text) not in page and _escaped(text[:40]) not in page
    assert "Withheld" in page and "something in it was withheld" in page
    assert "may repeat a secret" not in page and "drowned village" not in page.replace(_escaped(MARA), "")


def test_the_game_master_inspector_shows_everything_and_the_leak(client, campaign, narration):
    page = _inspector(client, campaign.owner, campaign, narration)
    for text in (CRYPT, MARA, WHISPER):
        assert _escaped(text) in page
    assert "may repeat a secret" in page and "Known only to Mara" in page


def test_a_narration_repeating_a_seat_secret_is_flagged_but_not_held_without_review(narration):
    [leak] = narration.leaks
    assert leak["audience"] == "Mara" and "drowned village" in leak["words"]
    assert not narration.held_for_review


def test_under_review_a_leaking_narration_waits_for_the_game_master(campaign, secrets, play, model):
    campaign.review = True
    campaign.save(update_fields=["review"])
    model.script({"reply": LEAKING})
    _, narration = play("I step into the crypt.")
    assert narration.leaks and narration.held_for_review


def test_an_edit_that_takes_the_secret_out_clears_the_leak_flag(client, campaign, secrets, play, model):
    campaign.review = True
    campaign.save(update_fields=["review"])
    model.script({"reply": LEAKING})
    _, narration = play("I step into the crypt.")
    client.force_login(campaign.owner)
    client.post(reverse("action_edit", args=[campaign.pk, narration.pk]), {"text": "The wind turns; bells, they say."})
    narration.refresh_from_db()
    assert narration.leaks == [] and narration.held_for_review
    assert "leak-flag" not in client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    client.post(reverse("action_edit", args=[campaign.pk, narration.pk]), {"text": LEAKING})
    narration.refresh_from_db()
    assert [leak["audience"] for leak in narration.leaks] == ["Mara"]


def test_a_whisper_is_read_by_its_seat_alone(client, campaign, members, secrets):
    pages = {}
    for name, user in [("gm", campaign.owner), *members.items()]:
        client.force_login(user)
        pages[name] = client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert _escaped(WHISPER) in pages["gm"] and _escaped(WHISPER) in pages["carol"]
    assert _escaped(WHISPER) not in pages["erin"] and _escaped(WHISPER) not in pages["dave"]
    assert 'id="whisper-send"' in pages["gm"] and 'id="whisper-send"' not in pages["carol"]


def test_a_whisper_is_told_live_to_its_seat_and_the_game_master_alone(
    client, campaign, members, django_capture_on_commit_callbacks,
):
    client.force_login(campaign.owner)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("whisper_send", args=[campaign.pk]), {"seat_name": "Ivo", "text": WHISPER},
                    HTTP_HX_REQUEST="true")
    [event] = CampaignEvent.objects.filter(campaign=campaign, kind="whisper")
    assert event.audience == "Ivo" and WHISPER not in str(event.data)
    for user, sees in [(campaign.owner, True), (members["carol"], True), (members["erin"], False),
                       (members["dave"], False)]:
        assert campaignevents.visible_to(place_in(campaign, user)).filter(pk=event.pk).exists() is sees


def test_the_whispers_panel_is_fetched_as_each_member_may_read_it(client, campaign, members, secrets):
    url = reverse("whispers_panel", args=[campaign.pk])
    panels = {}
    for name, user in [("gm", campaign.owner), *members.items()]:
        client.force_login(user)
        response = client.get(url, HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        panels[name] = response.content.decode()
    assert _escaped(WHISPER) in panels["gm"] and 'id="whisper-send"' in panels["gm"]
    assert _escaped(WHISPER) in panels["carol"] and 'id="whisper-send"' not in panels["carol"]
    # A seat with no whispers yet holds the panel, hidden, for the next one to be fetched into.
    assert 'id="whispers"' in panels["erin"] and " hidden>" in panels["erin"] and _escaped(WHISPER) not in panels["erin"]
    assert 'id="whispers"' not in panels["dave"] and _escaped(WHISPER) not in panels["dave"]
    client.force_login(UserFactory(username="mallory"))
    assert client.get(url).status_code == 404


def test_a_player_without_whispers_has_an_empty_panel_on_the_page(client, campaign, members):
    client.force_login(members["erin"])
    page = client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert 'id="whispers"' in page and 'data-whispers="' in page


def test_only_the_game_master_whispers(client, campaign, members):
    client.force_login(members["carol"])
    response = client.post(reverse("whisper_send", args=[campaign.pk]), {"seat_name": "Mara", "text": "Psst."})
    assert response.status_code == 403 and not Whisper.objects.exists()


def test_a_whisper_goes_only_to_a_players_seat(client, campaign, members):
    client.force_login(campaign.owner)
    response = client.post(reverse("whisper_send", args=[campaign.pk]), {"seat_name": "Nobody", "text": "Psst."},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and not Whisper.objects.exists()


def test_a_lorebook_entry_known_to_one_seat_leaves_world_info_for_that_seats_section(campaign, members, play, model):
    lantern = {"comment": "Lantern", "key": ["lantern"], "content": "The lantern guild lights the quay at dusk."}
    oath = {"comment": "Ivo's oath", "key": ["lantern"], "content": "Ivo swore an oath to the lantern guild."}
    result = knowledge_services.sources_import(
        campaign=campaign, files=[("harbour.json", world_info_book(lantern, oath))], enqueue=False
    )
    knowledge_services.source_index_now(result.created[0])
    LoreEntry.objects.filter(title="Ivo's oath").update(secret_seat="Ivo")
    # The stamp World Info's cache follows: an entry edit bumps its source's revision.
    KnowledgeSource.objects.filter(pk=result.created[0].pk).update(revision=F("revision") + 1)
    model.script({"reply": "The quay is quiet."})
    _, narration = play("I raise a lantern.")
    report = narration.snapshot.report
    assert [d["entry"] for d in report["world_info"]["activated"]] == ["Lantern"]
    [ivo] = [s for s in report["sections"] if s.get("audience") == "Ivo"]
    assert "Ivo swore an oath to the lantern guild." in ivo["text"]


def test_the_directors_note_is_the_game_masters_alone_in_the_inspector(client, campaign, members, play, model):
    campaign.director_note = "Let the bells ring when anyone lies to the abbot."
    campaign.save(update_fields=["director_note"])
    model.script({"reply": "The crypt is cold."})
    _, narration = play("I step into the crypt.")
    assert "bells ring when anyone lies" in narration.snapshot.messages[-1]["content"]
    for name in ("carol", "dave"):
        page = _inspector(client, members[name], campaign, narration)
        assert "bells ring when anyone lies" not in page and "the game master&#x27;s direction" in page
    assert "bells ring when anyone lies" in _inspector(client, campaign.owner, campaign, narration)
