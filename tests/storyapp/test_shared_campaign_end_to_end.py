"""A shared campaign played through the pages, end to end: a game master
(Alice), two players (Bob as Mara, Carol as Tobin) and a watcher (Dave),
with narrator-only lore, a secret of Mara's, a whisper to Tobin, a director's
note, review mode for part of the story and every turn order. After each
step, every member reads every page they can open, and the test checks each
reads exactly what is theirs: what the issue's hidden check does."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from contextbuild.rules import CAST_RULES
from knowledge.models import KnowledgeSource
from storyapp import campaignevents, lineage, tasks, turnorder
from storyapp.models import Action, Campaign, DerivedJob, WaitingTurn
from storyapp.views import events as events_view
from storyapp.views import stream as stream_view
from tests import sse
from tests.factories import ActionFactory, CampaignFactory, UserFactory

#: Each secret's text, and a phrase of it that no narration or action uses.
CRYPT = "The abbot buried the silver crown beneath the third pillar of the crypt."
MARA_SECRET = "Mara was born in the drowned village and still hears its bells at night."
WHISPER = "Tobin notices a fresh scratch on the lantern hook of the abbot."
DIRECTOR = "Let the bells ring whenever anyone lies to the abbot."
THINKING = "Mara must not learn of the wreck under the pier."
HELD = "The lighthouse keeper turns, and the lamp goes dark over the bay."
#: The narrator repeats Mara's secret in the held narration: the leak flag's case.
LEAKING = f"{HELD} They say Mara was born in the drowned village and still hears its bells at night."
PHRASES = {
    "crypt": "silver crown",
    "mara": "drowned village",
    "whisper": "scratch on the lantern hook",
    "director": "bells ring whenever",
    "thinking": "wreck under the pier",
}
QUIET = '\n<state>{"events": []}</state>'
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _sse(client, url) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return sse.body(response)


@pytest.fixture(autouse=True)
def short_streams(monkeypatch):
    monkeypatch.setattr(events_view, "EVENTS_MAX_SECONDS", 0.2)
    monkeypatch.setattr(events_view, "EVENTS_POLL_SECONDS", 0.05)
    monkeypatch.setattr(stream_view, "STREAM_MAX_SECONDS", 0.2)


@pytest.fixture
def campaign(alice, endpoint):
    """Alice's campaign; as game master she plays Ysolde, beside the seats."""
    return CampaignFactory(owner=alice, endpoint=endpoint, persona_name="Ysolde")


@pytest.fixture
def table(campaign, alice, library):
    """Alice invites her players and watcher from the members page; the lore
    holds a narrator-only source and Mara's secret; Alice whispers to Tobin
    and directs the narrator."""
    members = {"gm": alice, "mara": UserFactory(username="bob"), "tobin": UserFactory(username="carol"),
               "watcher": UserFactory(username="dave")}
    gm = client_of(alice)
    for key, role, seat, description in [("mara", "player", "Mara", "A ferrywoman, wary."),
                                         ("tobin", "player", "Tobin", "A sellsword, tired."),
                                         ("watcher", "watcher", "", "")]:
        response = gm.post(reverse("member_invite", args=[campaign.pk]), {
            "username": members[key].username, "role": role, "seat_name": seat, "seat_description": description,
        })
        assert response.status_code == 302, response.content.decode()
    library(campaign, CRYPT, filename="crypt.md", classification="canon", visibility="hidden", always_include=True)
    mara = library(campaign, MARA_SECRET, filename="mara.md")
    KnowledgeSource.objects.filter(pk=mara.pk).update(secret_seat="Mara")
    assert gm.post(reverse("whisper_send", args=[campaign.pk]), {"seat_name": "Tobin", "text": WHISPER}).status_code == 302
    Campaign.objects.filter(pk=campaign.pk).update(director_note=DIRECTOR)
    campaign.refresh_from_db()
    return members


@pytest.fixture
def send(campaign, django_capture_on_commit_callbacks):
    """A member's turn through the page, its narration run as a worker would."""

    def submit(user, text: str, *, status: int = 302):
        with django_capture_on_commit_callbacks(execute=True):
            response = client_of(user).post(reverse("turn_submit", args=[campaign.pk]), {"text": text})
        assert response.status_code == status, response.content.decode()
        campaign.refresh_from_db()
        return response

    return submit


def chats(model) -> list[list[dict]]:
    return [r["messages"] for r in model.requests() if r["path"].endswith("/chat/completions")]


def prompt_text(messages: list[dict]) -> str:
    return "\n".join(m["content"] for m in messages)


def _narrations(campaign) -> list[Action]:
    return list(Action.objects.filter(campaign=campaign, kind=Action.Kind.AI).order_by("id"))


def reads(user, campaign) -> dict[str, str]:
    """Every page of the story this member can open, as they read it."""
    campaign.refresh_from_db()
    client = client_of(user)
    pages = {
        "play": client.get(reverse("campaign_play", args=[campaign.pk])).content.decode(),
        # What a live page fetches when it hears of a change.
        "story": client.get(reverse("campaign_play", args=[campaign.pk]), **HTMX).content.decode(),
        "earlier": client.get(reverse("story_earlier", args=[campaign.pk]), {"before": campaign.head_id},
                              **HTMX).content.decode(),
        "state": client.get(reverse("campaign_state", args=[campaign.pk]), **HTMX).content.decode(),
        "members": client.get(reverse("campaign_members", args=[campaign.pk])).content.decode(),
        "events": _sse(client, reverse("campaign_events", args=[campaign.pk]) + "?after=0"),
    }
    for name in ("story_export_markdown", "story_export_html"):
        pages[name] = client.get(reverse(name, args=[campaign.pk])).content.decode()
    for action in Action.objects.filter(campaign=campaign):
        pages[f"detail {action.pk}"] = client.get(
            reverse("action_detail", args=[campaign.pk, action.pk]), **HTMX).content.decode()
        if action.kind == Action.Kind.AI:
            pages[f"stream {action.pk}"] = _sse(client, reverse("action_stream", args=[campaign.pk, action.pk]))
            inspector = client.get(reverse("context_inspector", args=[campaign.pk, action.pk]))
            assert inspector.status_code in (200, 404)
            pages[f"inspector {action.pk}"] = inspector.content.decode()
    return pages


def _unescaped(page: str) -> str:
    return page.replace("&#x27;", "'").replace("&quot;", '"').replace("&amp;", "&")


def assert_reads_only_their_own(table, campaign):
    """The secrets each member may read, and none of the others, on any page."""
    may_read = {
        "gm": set(PHRASES),
        "mara": {"mara"},
        "tobin": {"whisper"},
        "watcher": set(),
    }
    for member, allowed in may_read.items():
        pages = {name: _unescaped(page) for name, page in reads(table[member], campaign).items()}
        everything = "\n".join(pages.values())
        for secret, phrase in PHRASES.items():
            if secret in allowed:
                continue
            leaking = [name for name, page in pages.items() if phrase in page]
            assert not leaking, f"{member} reads {secret!r} on {leaking}"
        if member == "gm":
            assert all(phrase in everything for phrase in PHRASES.values())
        if member in ("mara", "tobin"):
            assert PHRASES[next(iter(allowed))] in everything, f"{member} should read their own secret"


def test_a_shared_campaign_played_through_the_pages_shows_each_member_only_theirs(
    campaign, table, send, model, django_capture_on_commit_callbacks, monkeypatch,
):
    alice, bob, carol, dave = table["gm"], table["mara"], table["tobin"], table["watcher"]

    # ---- free play: Mara acts; the narrator hears her by name, the cast and the direction.
    model.script({"reply": "The crypt door grinds open onto cold dark.\n<state>{\"events\": [{\"type\": \"move\", "
                           "\"seat\": \"Mara\", \"to\": \"the crypt stairs\"}]}</state>", "reasoning": THINKING})
    send(bob, "I open the crypt door.")
    [first] = chats(model)
    sent = prompt_text(first)
    assert "Mara: I open the crypt door." in sent
    assert CAST_RULES.splitlines()[0] in sent and "Tobin: A sellsword, tired." in sent
    assert DIRECTOR in sent and CRYPT in sent and MARA_SECRET in sent and WHISPER in sent
    assert "Known only to Mara:" in sent and "Known only to Tobin:" in sent
    [opening] = _narrations(campaign)
    assert opening.thinking == THINKING
    watching = client_of(dave)
    assert '<span class="who">Mara</span>' in watching.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert "the crypt stairs" in watching.get(reverse("campaign_state", args=[campaign.pk]), **HTMX).content.decode()
    exported = client_of(dave).get(reverse("story_export_markdown", args=[campaign.pk])).content.decode()
    assert "> **Mara:**\n> I open the crypt door." in exported
    assert "Mara" in client_of(dave).get(reverse("story_export_html", args=[campaign.pk])).content.decode()
    assert_reads_only_their_own(table, campaign)

    # ---- free play, at the same moment: Tobin's narration streams while Mara acts again.
    model.script({"reply": "Tobin's torch gutters." + QUIET, "reasoning": THINKING},
                 {"reply": "Dust falls from the vault." + QUIET}, {"reply": "The bells answer." + QUIET})
    with django_capture_on_commit_callbacks() as tobin_narration:
        assert client_of(carol).post(reverse("turn_submit", args=[campaign.pk]), {"text": "I raise my torch."}
                                     ).status_code == 302
    campaign.refresh_from_db()
    writing = Action.objects.get(pk=campaign.head_id)
    # Mid-stream, as the worker writes it: text and the narrator's thinking.
    Action.objects.filter(pk=writing.pk).update(status=Action.Status.STREAMING, text="Tobin's torch",
                                                thinking=THINKING, heartbeat=timezone.now())
    send(bob, "I step past him into the vault.")
    send(alice, "Somewhere above, the bells start ringing.")
    assert WaitingTurn.objects.filter(campaign=campaign).count() == 2
    for member in ("mara", "tobin", "watcher"):
        pages = reads(table[member], campaign)
        assert not [name for name, page in pages.items() if PHRASES["thinking"] in page], member
    gm_play = client_of(alice).get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert PHRASES["thinking"] in gm_play
    # Nobody may undo while another's narration streams, not even the game master.
    refused = client_of(alice).post(reverse("turn_undo", args=[campaign.pk]), **HTMX)
    assert refused.status_code == 409 and "still writing" in refused.content.decode()
    Action.objects.filter(pk=writing.pk).update(status=Action.Status.PENDING, text="", thinking="")
    with django_capture_on_commit_callbacks(execute=True):
        for callback in tobin_narration:
            callback()
    campaign.refresh_from_db()
    players = list(Action.objects.filter(campaign=campaign, kind=Action.Kind.PLAYER).order_by("id"))
    assert [(a.seat_name, a.text) for a in players] == [
        ("Mara", "I open the crypt door."), ("Tobin", "I raise my torch."), ("Mara", "I step past him into the vault."),
        ("", "Somewhere above, the bells start ringing."),
    ]
    assert [a.status for a in _narrations(campaign)] == [Action.Status.DONE] * 4
    assert [a.kind for a in lineage.tail(campaign.pk, campaign.head_id, 20)] == [Action.Kind.PLAYER, Action.Kind.AI] * 4
    assert "Tobin: I raise my torch." in prompt_text(chats(model)[1])
    assert "Mara: I step past him into the vault." in prompt_text(chats(model)[2])
    # The live pages hear of each action once, by its id alone.
    told = _sse(client_of(dave), reverse("campaign_events", args=[campaign.pk]) + "?after=0")
    changes = [json.loads(line[len("data: "):]) for line in told.splitlines()
               if line.startswith("data: {") and '"kind"' in line]
    assert sorted(c["data"]["action"] for c in changes if c["kind"] == "action") == [a.pk for a in players]
    assert_reads_only_their_own(table, campaign)

    # ---- rounds under review: the round's narration waits for the game master.
    gm = client_of(alice)
    Campaign.objects.filter(pk=campaign.pk).update(review=True)
    assert gm.post(reverse("campaign_turn_order", args=[campaign.pk]),
                   {"turn_mode": "rounds", "turn_seconds": 0}).status_code == 302
    model.script({"reply": LEAKING + QUIET})
    send(bob, "I wait at the shore.")
    assert len(_narrations(campaign)) == 4, "the round waits for Tobin"
    with django_capture_on_commit_callbacks(execute=True):
        assert client_of(carol).post(reverse("turn_pass", args=[campaign.pk])).status_code == 302
    held = _narrations(campaign)[-1]
    assert held.text == LEAKING and held.held_for_review and held.leaks[0]["audience"] == "Mara"
    # Nothing is derived from it (memories, summaries) before the game master lets it be read.
    assert not DerivedJob.objects.filter(anchor=held).exists()
    assert "Mara: I wait at the shore." in prompt_text(chats(model)[-1])
    for member in ("mara", "tobin", "watcher"):
        pages = reads(table[member], campaign)
        assert not [name for name, page in pages.items() if "lighthouse keeper" in page], member
        assert client_of(table[member]).post(reverse("narration_approve", args=[campaign.pk, held.pk])
                                             ).status_code == 403
    assert "lighthouse keeper" in client_of(alice).get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert "may repeat a secret" in gm.get(reverse("context_inspector", args=[campaign.pk, held.pk])).content.decode()
    # The game master takes the secret out, then lets the players read it.
    assert gm.post(reverse("action_edit", args=[campaign.pk, held.pk]), {"text": HELD}).status_code == 302
    before = campaignevents.latest_id(campaign)
    with django_capture_on_commit_callbacks(execute=True):
        assert gm.post(reverse("narration_approve", args=[campaign.pk, held.pk])).status_code == 302
    # The players' live pages are told, and fetch the story that now shows it.
    told = _sse(client_of(dave), reverse("campaign_events", args=[campaign.pk]) + f"?after={before}")
    assert f'"kind": "narration-approved", "data": {{"action": {held.pk}}}' in told
    assert DerivedJob.objects.filter(anchor=held, kind=DerivedJob.Kind.MEMORIES).exists()
    for member in ("mara", "tobin", "watcher"):
        assert "lighthouse keeper" in client_of(table[member]).get(
            reverse("campaign_play", args=[campaign.pk])).content.decode()
    Campaign.objects.filter(pk=campaign.pk).update(review=False)

    # ---- turns: seats in the order they joined; the page says whose turn it is.
    assert gm.post(reverse("campaign_turn_order", args=[campaign.pk]),
                   {"turn_mode": "turns", "turn_seconds": 0}).status_code == 302
    out_of_turn = send(carol, "I go first.", status=409)
    assert "Mara" in out_of_turn.content.decode() and "turn" in out_of_turn.content.decode()
    model.script({"reply": "The tide turns." + QUIET}, {"reply": "Gulls wheel overhead." + QUIET})
    send(bob, "I push the boat out.")
    assert "Tobin" in client_of(carol).get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        assert client_of(carol).post(reverse("turn_pass", args=[campaign.pk])).status_code == 302
    send(bob, "I row.")
    assert_reads_only_their_own(table, campaign)

    # ---- the watcher does nothing; undo and retry are the game master's.
    for name, data in [("turn_submit", {"text": "I shout."}), ("turn_pass", {}), ("turn_undo", {}),
                       ("turn_retry", {}), ("turn_redo", {}), ("whisper_send", {"seat_name": "Mara", "text": "Hi"}),
                       ("round_close", {}), ("campaign_turn_order", {"turn_mode": "free", "turn_seconds": 0}),
                       ("member_invite", {"username": "bob", "role": "watcher"})]:
        assert client_of(dave).post(reverse(name, args=[campaign.pk]), data).status_code == 403, name
    last = Action.objects.get(pk=campaign.head_id)
    for name in ("narration_approve", "narration_stop", "action_edit", "action_delete", "alternative_choose"):
        assert client_of(dave).post(reverse(name, args=[campaign.pk, last.pk]), {"text": "Mine."}).status_code == 403
    for player in (bob, carol):
        for name in ("action_edit", "action_delete", "narration_stop"):
            assert client_of(player).post(reverse(name, args=[campaign.pk, last.pk]), {"text": "Mine."}
                                          ).status_code == 403, name
        for name in ("turn_undo", "turn_retry", "turn_redo"):
            assert client_of(player).post(reverse(name, args=[campaign.pk])).status_code == 403, name
        assert client_of(player).get(reverse("campaign_export_bundle", args=[campaign.pk])).status_code == 403
    assert client_of(dave).get(reverse("campaign_export_bundle", args=[campaign.pk])).status_code == 403
    head = campaign.head_id
    with django_capture_on_commit_callbacks(execute=True):
        assert gm.post(reverse("turn_undo", args=[campaign.pk])).status_code == 302
    campaign.refresh_from_db()
    assert campaign.head_id != head
    model.script({"reply": "The oars creak." + QUIET})
    with django_capture_on_commit_callbacks(execute=True):
        assert gm.post(reverse("turn_retry", args=[campaign.pk])).status_code == 302

    # ---- the bundle is the game master's, with seats and attribution but no accounts.
    bundle = gm.get(reverse("campaign_export_bundle", args=[campaign.pk]))
    assert bundle.status_code == 200
    data = json.loads(b"".join(bundle.streaming_content) if bundle.streaming else bundle.content)
    assert {s["name"] for s in data["seats"]} == {"Mara", "Tobin"}
    assert not re.search(r"\b(bob|carol|dave)\b", json.dumps(data))
    assert_reads_only_their_own(table, campaign)


def test_the_game_masters_undo_waits_for_an_action_about_to_be_narrated(
    campaign, table, send, model, django_capture_on_commit_callbacks, monkeypatch,
):
    """Between a narration's end and the next waiting action's place (the
    worker settles the turn order just after it stores the narration), an
    undo would take back the story the waiting action answered."""
    alice, bob, carol = table["gm"], table["mara"], table["tobin"]
    model.script({"reply": "The crypt door grinds open." + QUIET}, {"reply": "Cold air." + QUIET})
    with django_capture_on_commit_callbacks() as first:
        client_of(bob).post(reverse("turn_submit", args=[campaign.pk]), {"text": "I open the door."})
    send(carol, "I follow Mara in.")
    monkeypatch.setattr(tasks.turnorder, "after_narration", lambda **kwargs: None)
    with django_capture_on_commit_callbacks(execute=True):
        for callback in first:
            callback()
    campaign.refresh_from_db()
    assert Action.objects.get(pk=campaign.head_id).status == Action.Status.DONE
    assert WaitingTurn.objects.filter(campaign=campaign).exists()
    refused = client_of(alice).post(reverse("turn_undo", args=[campaign.pk]), **HTMX)
    assert refused.status_code == 409
    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        turnorder.settle(campaign=campaign, now=timezone.now())
    campaign.refresh_from_db()
    story = [(a.kind, a.text) for a in Action.objects.filter(campaign=campaign, kind=Action.Kind.PLAYER)]
    assert story == [("player", "I open the door."), ("player", "I follow Mara in.")]
    assert Action.objects.get(pk=campaign.head_id).parent.text == "I follow Mara in."


def test_the_game_masters_narration_cap_holds_in_a_shared_campaign_counting_it_once(
    campaign, table, send, model, settings, alice, django_capture_on_commit_callbacks,
):
    settings.LOREMASTER_NARRATIONS_PER_READER = 1
    other = CampaignFactory(owner=alice, endpoint=campaign.endpoint)
    elsewhere = ActionFactory(campaign=other, kind=Action.Kind.AI, text="", status=Action.Status.PENDING,
                              heartbeat=timezone.now())
    refused = send(table["mara"], "I open the door.", status=409)
    assert "game master already has 1" in refused.content.decode()
    assert not Action.objects.filter(campaign=campaign).exists()
    assert not WaitingTurn.objects.filter(campaign=campaign).exists()
    # With the other story done, the shared one is narrated, and an action
    # sent while it streams waits for it: the campaign counts once.
    Action.objects.filter(pk=elsewhere.pk).update(status=Action.Status.DONE, text="Done.", heartbeat=None)
    model.script({"reply": "The door opens." + QUIET}, {"reply": "Tobin follows." + QUIET})
    with django_capture_on_commit_callbacks() as first:
        assert client_of(table["mara"]).post(reverse("turn_submit", args=[campaign.pk]),
                                             {"text": "I open the door."}).status_code == 302
    send(table["tobin"], "I follow her.")
    with django_capture_on_commit_callbacks(execute=True):
        for callback in first:
            callback()
    assert [a.status for a in _narrations(campaign)] == [Action.Status.DONE] * 2


def test_each_players_turn_quota_is_their_own(campaign, table, send, model, settings, one_quota_window):
    settings.LOREMASTER_READER_RATES = {**settings.LOREMASTER_READER_RATES, "turns": 1}
    model.script({"reply": "The door opens." + QUIET}, {"reply": "Tobin follows." + QUIET})
    send(table["mara"], "I open the door.")
    assert send(table["mara"], "I open it wider.", status=429)
    send(table["tobin"], "I follow her.")
    assert [a.seat_name for a in Action.objects.filter(campaign=campaign, kind=Action.Kind.PLAYER)] == ["Mara", "Tobin"]


def test_a_shared_campaigns_bundle_imports_with_its_seats_and_their_secrets(
    campaign, table, send, model, django_capture_on_commit_callbacks,
):
    model.script({"reply": "The crypt door grinds open." + QUIET})
    send(table["mara"], "I open the crypt door.")
    bundle = client_of(table["gm"]).get(reverse("campaign_export_bundle", args=[campaign.pk]))
    content = b"".join(bundle.streaming_content) if bundle.streaming else bundle.content
    erin = UserFactory(username="erin")
    with django_capture_on_commit_callbacks(execute=True):
        response = client_of(erin).post(reverse("campaign_import"),
                                        {"bundle": SimpleUploadedFile("bundle.json", content)})
    assert response.status_code == 302
    imported = Campaign.objects.get(owner=erin)
    assert [a.seat_name for a in Action.objects.filter(campaign=imported, kind=Action.Kind.PLAYER)] == ["Mara"]
    assert {s["name"] for s in imported.imported_seats} >= {"Mara", "Tobin"}
    assert KnowledgeSource.objects.get(campaign=imported, original_filename="mara.md").secret_seat == "Mara"
    assert not imported.memberships.exists()


def test_a_player_cannot_rename_their_seat_into_another_characters_secrets(campaign, table, client):
    """Secrets are kept by seat name: when Tobin's player leaves, Mara's may
    not take the name and read Tobin's whispers; nor a seat the lore keeps
    secrets for that nobody holds yet. The game master may seat them there."""
    KnowledgeSource.objects.filter(campaign=campaign, original_filename="mara.md").update(secret_seat="Ivo")
    assert client_of(table["tobin"]).post(reverse("member_leave", args=[campaign.pk])).status_code == 302
    mara = client_of(table["mara"])
    for name in ("Tobin", "tobin", "Ivo"):
        refused = mara.post(reverse("seat_edit", args=[campaign.pk]), {"seat_name": name, "seat_description": ""})
        assert refused.status_code == 400 and "only the game master can seat you there" in refused.content.decode()
        assert PHRASES["whisper"] not in _unescaped(mara.get(reverse("campaign_play", args=[campaign.pk])
                                                             ).content.decode())
    assert mara.post(reverse("seat_edit", args=[campaign.pk]), {"seat_name": "Mara the Elder",
                                                                "seat_description": ""}).status_code == 302
    membership = campaign.memberships.get(user=table["mara"])
    response = client_of(table["gm"]).post(reverse("member_change", args=[campaign.pk, membership.pk]),
                                           {"role": "player", "seat_name": "Tobin", "seat_description": ""})
    assert response.status_code == 302
    assert PHRASES["whisper"] in _unescaped(mara.get(reverse("campaign_play", args=[campaign.pk])).content.decode())
