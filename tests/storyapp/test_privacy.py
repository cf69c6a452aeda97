"""No reader can see or change another reader's objects, by page or by URL guessing.

The test walks every URL pattern of the project: one that takes an id must
answer 404 to an outsider for both GET and POST, and a pattern whose id
parameter this test does not know how to fill fails the test, so a new URL
cannot slip in without coverage. The members of a shared campaign walk it
too: a watcher changes nothing anywhere, a player nothing but the story
(their turn) and their own seat, and neither reaches the library.

Named readers: alice owns (the game master), carol plays as Wren, dave
plays as Tam, walt watches, bob is an outsider.
"""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from knowledge.models import LoreEntry
from knowledge.models import KnowledgeSource
from storyapp.models import Action, Campaign, Membership
from tests.factories import (
    CampaignFactory,
    IndexJobFactory,
    KnowledgeSourceFactory,
    MembershipFactory,
    UserFactory,
    story,
)

OWN_PREFIXES = ("storyapp.", "knowledge.")


def _patterns(resolver=None, names=()):
    """(pattern, every id parameter on its route, including its includes')."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        own = tuple(entry.pattern.regex.groupindex)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, names + own)
        elif isinstance(entry, URLPattern):
            yield entry, names + own


def _id_patterns():
    return [
        (pattern, names)
        for pattern, names in _patterns()
        if names and getattr(pattern.callback, "__module__", "").startswith(OWN_PREFIXES)
        # Admin pages belong to staff, behind the admin's own login (tested
        # in test_window_probe); readers own nothing there.
        and not getattr(pattern.callback, "__module__", "").endswith(".admin")
    ]


#: What every walking POST carries: enough of every form's fields that a view
#: which let the request through would change something.
INTRUSION = {"text": "intruder was here", "username": "bob", "role": "player", "seat_name": "Intruder",
             "seat_description": "intruder", "title": "intruder", "plot_essentials": "intruder",
             "authors_note": "intruder", "persona_name": "Intruder", "narration_length": ""}

#: Views that only read the story: a member's POST is answered as a GET (or
#: its redirect), and must change nothing either.
READS = {"campaign_play", "story_earlier", "action_detail", "action_stream", "story_export_markdown",
         "story_export_html", "campaign_members", "context_inspector", "campaign_events", "whispers_panel"}


@pytest.fixture
def alices_story(alice, endpoint):
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    actions = story(campaign, "I walk to the quay.", "Gulls wheel over the tide.")
    MembershipFactory(campaign=campaign, user=UserFactory(username="carol"), seat_name="Wren")
    MembershipFactory(campaign=campaign, user=UserFactory(username="dave"), seat_name="Tam")
    MembershipFactory(campaign=campaign, user=UserFactory(username="walt"), role=Membership.Role.WATCHER)
    return campaign, actions


def _member(campaign: Campaign, username: str) -> Membership:
    return campaign.memberships.select_related("user").get(user__username=username)


def _known(campaign: Campaign, actions: list[Action], member: Membership | None = None) -> dict:
    """An object of the campaign for each id parameter the URLs take."""
    source = KnowledgeSourceFactory(campaign=campaign, format="SillyTavern World Info")
    entry = LoreEntry.objects.create(source=source, position=0, title="Alice's entry", keys=["quay"])
    member = member or campaign.memberships.first()
    return {"pk": campaign.pk, "action_id": actions[-1].pk, "source_id": source.pk,
            "job_id": IndexJobFactory(source=source).pk, "entry_id": entry.pk, "member_id": member.pk}


def _kwargs_for(pattern: URLPattern, names: tuple, known: dict) -> dict:
    missing = [name for name in names if name not in known]
    assert not missing, f"{pattern.name} takes {missing}: teach test_privacy how to fill them"
    return {name: known[name] for name in names}


def test_every_url_with_an_id_is_covered():
    names = {pattern.name for pattern, _ in _id_patterns()}
    assert {"campaign_play", "action_stream", "turn_submit", "action_edit"} <= names


@pytest.mark.parametrize("method", ["get", "post"])
def test_an_outsider_gets_404_for_every_url_of_anothers_campaign(client, bob, alices_story, method):
    campaign, actions = alices_story
    head_before = campaign.head_id
    texts_before = list(Action.objects.order_by("id").values_list("text", flat=True))
    client.force_login(bob)
    known = _known(campaign, actions)
    for pattern, names in _id_patterns():
        url = reverse(pattern.name, kwargs=_kwargs_for(pattern, names, known))
        response = getattr(client, method)(url, {**INTRUSION, "before": actions[-1].pk})
        # A method the view never accepts is refused before any lookup, the
        # same for every id, so it confirms nothing.
        nowhere = reverse(pattern.name, kwargs={name: 987654 for name in names})
        expected = 405 if getattr(client, method)(nowhere).status_code == 405 else 404
        assert response.status_code == expected, f"{method.upper()} {url} ({pattern.name}) gave {response.status_code}"
    campaign.refresh_from_db()
    assert campaign.head_id == head_before
    assert list(Action.objects.order_by("id").values_list("text", flat=True)) == texts_before
    assert set(LoreEntry.objects.values_list("title", flat=True)) == {"Alice's entry"}


def _everything(campaign: Campaign) -> dict:
    """All a member's request could change: the story, its settings, its
    members, its lore."""
    campaign = Campaign.objects.get(pk=campaign.pk)
    return {
        "campaign": {f.attname: getattr(campaign, f.attname) for f in Campaign._meta.concrete_fields
                     if f.name != "updated"},
        "actions": list(Action.objects.order_by("id").values_list("id", "text", "status")),
        "members": sorted(Membership.objects.values_list("campaign_id", "user_id", "role", "seat_name",
                                                         "seat_description")),
        "sources": sorted(KnowledgeSource.objects.values_list("id", "title")),
        "entries": sorted(LoreEntry.objects.values_list("id", "title", "text", "keys")),
    }


def _walk(client, method: str, known: dict, actions: list[Action], *, skip: frozenset = frozenset()):
    """Every campaign URL asked with `method`: (pattern, status)."""
    for pattern, names in _id_patterns():
        if pattern.name in skip:
            continue
        url = reverse(pattern.name, kwargs=_kwargs_for(pattern, names, known))
        response = getattr(client, method)(url, {**INTRUSION, "before": actions[-1].pk})
        yield pattern, response.status_code


@pytest.mark.parametrize(("reader", "theirs"), [
    # A watcher may only leave (walked last, by the test below).
    ("walt", frozenset({"member_leave"})),
    # A player may act (their turn) or pass it, keep their own seat, and leave.
    ("carol", frozenset({"member_leave", "turn_submit", "turn_pass", "seat_edit"})),
])
def test_a_members_post_to_what_is_not_theirs_changes_nothing(client, alices_story, reader, theirs):
    campaign, actions = alices_story
    client.force_login(_member(campaign, reader).user)
    known = _known(campaign, actions, _member(campaign, "dave"))
    before = _everything(campaign)
    for pattern, status in _walk(client, "post", known, actions, skip=theirs):
        allowed = {200, 302, 403, 404, 405} if pattern.name in READS else {403, 404, 405}
        assert status in allowed, f"{reader}: POST {pattern.name} gave {status}"
    assert _everything(campaign) == before


@pytest.mark.parametrize("reader", ["carol", "walt"])
def test_a_member_reads_the_story_but_never_the_library(client, alices_story, reader):
    campaign, actions = alices_story
    client.force_login(_member(campaign, reader).user)
    assert client.get(reverse("campaign_play", kwargs={"pk": campaign.pk})).status_code == 200
    assert client.get(reverse("campaign_members", kwargs={"pk": campaign.pk})).status_code == 200
    library = [(p, n) for p, n in _id_patterns() if p.callback.__module__.startswith("knowledge.")]
    assert library
    known = _known(campaign, actions)
    for method in ("get", "post"):
        for pattern, names in library:
            url = reverse(pattern.name, kwargs=_kwargs_for(pattern, names, known))
            status = getattr(client, method)(url, INTRUSION).status_code
            nowhere = reverse(pattern.name, kwargs={name: 987654 for name in names})
            expected = 405 if getattr(client, method)(nowhere).status_code == 405 else 404
            assert status == expected, f"{reader}: {method.upper()} {pattern.name} gave {status}"


@pytest.mark.parametrize("reader", ["carol", "walt"])
def test_a_member_gets_no_game_master_page(client, alices_story, reader):
    campaign, actions = alices_story
    client.force_login(_member(campaign, reader).user)
    known = _known(campaign, actions, _member(campaign, "dave"))
    for pattern, status in _walk(client, "get", known, actions):
        if pattern.name not in READS | {"campaign_state"}:
            assert status in {403, 404, 405}, f"{reader}: GET {pattern.name} gave {status}"


def test_a_players_turn_and_seat_are_theirs_alone(client, alices_story):
    """What a player may POST changes only the story (a turn) and their own seat."""
    campaign, actions = alices_story
    client.force_login(_member(campaign, "carol").user)
    client.post(reverse("seat_edit", kwargs={"pk": campaign.pk}), {**INTRUSION, "seat_name": "Wren the Quiet"})
    assert _member(campaign, "carol").seat_name == "Wren the Quiet"
    assert _member(campaign, "dave").seat_name == "Tam"
    assert Campaign.objects.get(pk=campaign.pk).owner.username == "alice"


@pytest.mark.parametrize("reader", ["carol", "walt"])
def test_a_member_who_leaves_is_an_outsider_again(client, alices_story, reader):
    campaign, _ = alices_story
    client.force_login(_member(campaign, reader).user)
    assert client.post(reverse("member_leave", kwargs={"pk": campaign.pk})).status_code == 302
    assert client.get(reverse("campaign_play", kwargs={"pk": campaign.pk})).status_code == 404


def test_an_action_of_one_campaign_is_not_reachable_through_another(client, alice, alices_story):
    campaign, actions = alices_story
    other = CampaignFactory(owner=alice)
    client.force_login(alice)
    url = reverse("action_edit", kwargs={"pk": other.pk, "action_id": actions[0].pk})
    assert client.get(url).status_code == 404


def test_a_reader_lists_only_their_own_and_shared_campaigns(client, alice, bob, alices_story):
    CampaignFactory(owner=bob, title="Bob's secret saga")
    client.force_login(alice)
    page = client.get(reverse("campaign_list")).content.decode()
    assert alices_story[0].title in page and "Bob&#x27;s secret saga" not in page


def test_pages_need_a_login(client, alices_story):
    response = client.get(reverse("campaign_play", kwargs={"pk": alices_story[0].pk}))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
