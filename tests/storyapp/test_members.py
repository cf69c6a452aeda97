"""The members of a campaign: who may be invited, seats, leaving, removal,
handing over, and what each role's pages offer.

Named readers: alice owns (the game master), carol plays as Wren, walt
watches, bob is an outsider with an account.
"""

import pytest
from django.urls import reverse

from storyapp import members
from storyapp.models import Campaign, Membership
from tests.factories import CampaignFactory, MembershipFactory, UserFactory, story


@pytest.fixture
def campaign(alice):
    return CampaignFactory(owner=alice, title="The Drowned Bell", persona_name="Mara")


@pytest.fixture
def carol(campaign):
    return MembershipFactory(campaign=campaign, user=UserFactory(username="carol"), seat_name="Wren").user


@pytest.fixture
def walt(campaign):
    return MembershipFactory(campaign=campaign, user=UserFactory(username="walt"), role=Membership.Role.WATCHER).user


def _seats(campaign):
    return {m.user.username: (m.role, m.seat_name) for m in campaign.memberships.select_related("user")}


def test_an_existing_reader_is_invited_as_a_player_with_a_seat(campaign, bob):
    membership = members.invite(campaign=campaign, username="bob", role="player",
                                seat_name="  Tam   the  Bold ", seat_description="A smith's son.")
    assert (membership.user, membership.role, membership.seat_name) == (bob, "player", "Tam the Bold")
    assert membership.seat_description == "A smith's son."


def test_a_watcher_holds_no_seat(campaign, bob):
    membership = members.invite(campaign=campaign, username="bob", role="watcher", seat_name="Tam")
    assert (membership.role, membership.seat_name, membership.seat_description) == ("watcher", "", "")


@pytest.mark.parametrize(("username", "role", "seat", "refusal"), [
    ("nobody", "player", "Tam", "No reader is called “nobody”."),
    ("alice", "player", "Tam", "alice is this story's game master already."),
    ("carol", "watcher", "", "carol is already a member of this story."),
    ("bob", "player", "  ", "A player needs a seat"),
    ("bob", "player", "wREN", "Another seat of this story is already called “wREN”."),
    ("bob", "player", "x" * 101, "at most 100 characters"),
    ("bob", "narrator", "Tam", "A member is a player or a watcher"),
])
def test_an_invitation_the_rules_refuse_stores_nothing(campaign, bob, carol, username, role, seat, refusal):
    before = _seats(campaign)
    with pytest.raises(members.MembershipRefused, match=refusal):
        members.invite(campaign=campaign, username=username, role=role, seat_name=seat)
    assert _seats(campaign) == before


def test_the_database_holds_seat_names_unique_however_they_are_written(campaign, carol, bob):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="already has that name"):
        Membership(campaign=campaign, user=bob, role="player", seat_name="WREN").validate_constraints()


def test_the_same_seat_name_may_be_taken_in_another_campaign(alice, carol, bob):
    other = CampaignFactory(owner=alice)
    assert members.invite(campaign=other, username="bob", role="player", seat_name="Wren").seat_name == "Wren"


def test_a_member_is_reseated_and_may_keep_their_own_name_in_other_case(campaign, carol):
    membership = campaign.memberships.get(user=carol)
    assert members.change(membership=membership, role="player", seat_name="wren", seat_description="Quiet.").seat_name == "wren"
    assert members.change(membership=membership, role="watcher").seat_name == ""
    assert _seats(campaign) == {"carol": ("watcher", "")}


def test_removing_and_leaving_end_the_membership_but_not_the_owners_place(campaign, alice, carol, walt):
    members.remove(campaign=campaign, user=carol)
    members.leave(campaign=campaign, user=walt)
    assert _seats(campaign) == {}
    with pytest.raises(members.MembershipRefused, match="cannot leave their own story"):
        members.leave(campaign=campaign, user=alice)
    with pytest.raises(members.MembershipRefused, match="carol is not a member"):
        members.remove(campaign=campaign, user=carol)


def test_handing_over_makes_the_member_game_master_and_seats_the_old_owner(campaign, alice, carol):
    members.hand_over(campaign=campaign, to_user=carol)
    campaign.refresh_from_db()
    assert campaign.owner == carol
    assert _seats(campaign) == {"alice": ("player", "Mara")}
    assert not campaign.memberships.filter(user=campaign.owner).exists()


def test_a_seat_cannot_take_the_game_masters_character(campaign, bob):
    with pytest.raises(members.MembershipRefused, match="“mara” is the game master's character"):
        members.invite(campaign=campaign, username="bob", role="player", seat_name="mara")
    assert not campaign.memberships.filter(user__username="bob").exists()


def test_the_persona_leaves_with_the_old_game_master_as_their_seat(campaign, alice, carol):
    members.hand_over(campaign=campaign, to_user=carol)
    campaign.refresh_from_db()
    assert (campaign.persona_name, campaign.persona_description) == ("", "")


def test_an_old_owner_whose_persona_seat_is_taken_is_seated_by_username(campaign, alice, carol, bob):
    # A seat of the persona's name: the game master renamed their persona after bob sat down.
    MembershipFactory(campaign=campaign, user=bob, seat_name="mara")
    members.hand_over(campaign=campaign, to_user=carol)
    assert _seats(campaign) == {"alice": ("player", "alice"), "bob": ("player", "mara")}


def test_a_hand_over_that_cannot_seat_the_old_owner_changes_nothing(campaign, alice, carol, bob):
    MembershipFactory(campaign=campaign, user=bob, seat_name="Mara")
    MembershipFactory(campaign=campaign, user=UserFactory(username="dave"), seat_name="Alice")
    before = _seats(campaign)
    with pytest.raises(members.MembershipRefused, match="both taken"):
        members.hand_over(campaign=campaign, to_user=carol)
    campaign.refresh_from_db()
    assert campaign.owner == alice and _seats(campaign) == before


def test_a_member_at_the_campaign_cap_cannot_be_handed_another(settings, campaign, alice, carol):
    CampaignFactory(owner=carol)
    settings.LOREMASTER_CAMPAIGNS_PER_READER = 1
    with pytest.raises(members.MembershipRefused, match="carol already owns as many campaigns"):
        members.hand_over(campaign=campaign, to_user=carol)
    campaign.refresh_from_db()
    assert campaign.owner == alice and _seats(campaign) == {"carol": ("player", "Wren")}


def test_only_a_member_can_be_handed_the_campaign(campaign, alice, bob):
    with pytest.raises(members.MembershipRefused, match="bob is not a member"):
        members.hand_over(campaign=campaign, to_user=bob)
    assert Campaign.objects.get(pk=campaign.pk).owner == alice


# ------------------------------------------------------------------ The page

def _url(name, campaign, **kwargs):
    return reverse(name, kwargs={"pk": campaign.pk, **kwargs})


def test_the_game_master_invites_through_the_page(client, alice, bob, campaign):
    client.force_login(alice)
    response = client.post(_url("member_invite", campaign),
                           {"username": "bob", "role": "player", "seat_name": "Tam", "seat_description": "A smith."})
    assert response.status_code == 302 and response["Location"] == _url("campaign_members", campaign)
    page = client.get(response["Location"]).content.decode()
    assert "bob joins as a player, as Tam." in page and "A smith." in page


def test_a_refused_invitation_shows_the_reason_and_keeps_what_was_typed(client, alice, campaign, carol):
    client.force_login(alice)
    response = client.post(_url("member_invite", campaign), {"username": "nobody", "role": "player", "seat_name": "Tam"})
    page = response.content.decode()
    assert response.status_code == 400
    assert "No reader is called “nobody”." in page and 'value="nobody"' in page and 'value="Tam"' in page


def test_htmx_gets_the_member_list_back_with_the_news(client, alice, bob, campaign):
    client.force_login(alice)
    response = client.post(_url("member_invite", campaign), {"username": "bob", "role": "watcher"},
                           HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert response.status_code == 200 and page.lstrip().startswith('<section id="members"')
    assert "bob joins as a watcher." in page


def test_the_game_master_reseats_and_removes_members(client, alice, campaign, carol, walt):
    client.force_login(alice)
    carols, walts = (campaign.memberships.get(user=u) for u in (carol, walt))
    client.post(_url("member_change", campaign, member_id=walts.pk), {"role": "player", "seat_name": "Ash"})
    client.post(_url("member_remove", campaign, member_id=carols.pk))
    assert _seats(campaign) == {"walt": ("player", "Ash")}


def test_hand_over_asks_first_then_leaves_the_old_owner_a_player(client, alice, campaign, carol):
    client.force_login(alice)
    url = _url("campaign_hand_over", campaign, member_id=campaign.memberships.get(user=carol).pk)
    assert "Make carol the game master" in client.get(url).content.decode()
    assert Campaign.objects.get(pk=campaign.pk).owner == alice
    client.post(url)
    assert Campaign.objects.get(pk=campaign.pk).owner == carol
    assert client.post(_url("member_invite", campaign), {"username": "bob", "role": "watcher"}).status_code == 403


def test_a_player_sees_the_members_and_edits_only_their_own_seat(client, campaign, carol, walt):
    client.force_login(carol)
    page = client.get(_url("campaign_members", campaign)).content.decode()
    assert "Player as <strong>Wren</strong>" in page and "walt" in page
    assert "Invite a reader" not in page and "Hand the story over" not in page
    assert 'id="own-seat"' in page and "Leave this story" in page
    client.post(_url("seat_edit", campaign), {"seat_name": "Wren the Quiet", "seat_description": "Sees far."})
    assert _seats(campaign)["carol"] == ("player", "Wren the Quiet")
    assert campaign.memberships.get(user=carol).seat_description == "Sees far."


def test_a_players_seat_cannot_take_another_seats_name(client, alice, campaign, carol, bob):
    members.invite(campaign=campaign, username="bob", role="player", seat_name="Tam")
    client.force_login(carol)
    response = client.post(_url("seat_edit", campaign), {"seat_name": "TAM"})
    assert response.status_code == 400 and "already called “TAM”" in response.content.decode()
    assert _seats(campaign)["carol"] == ("player", "Wren")


def test_a_watcher_has_no_seat_to_edit_and_may_leave(client, campaign, walt):
    client.force_login(walt)
    page = client.get(_url("campaign_members", campaign)).content.decode()
    assert 'id="own-seat"' not in page and "Leave this story" in page
    assert client.post(_url("seat_edit", campaign), {"seat_name": "Ash"}).status_code == 403
    response = client.post(_url("member_leave", campaign))
    assert response.status_code == 302 and response["Location"] == reverse("campaign_list")
    assert client.get(_url("campaign_play", campaign)).status_code == 404


def test_the_game_master_is_told_to_hand_over_before_leaving(client, alice, campaign):
    client.force_login(alice)
    response = client.post(_url("member_leave", campaign))
    assert response.status_code == 400 and "hand it over to a member first" in response.content.decode()


def test_the_campaign_list_shows_shared_campaigns_with_the_readers_role(client, alice, campaign, carol, walt):
    CampaignFactory(owner=carol, title="Carol's own")
    client.force_login(carol)
    page = client.get(reverse("campaign_list")).content.decode()
    assert "The Drowned Bell" in page and "Player as Wren" in page and "Carol&#x27;s own" in page
    assert "Game master" in page
    assert _url("campaign_edit", campaign) not in page and _url("campaign_members", campaign) in page
    client.force_login(walt)
    assert "Watcher" in client.get(reverse("campaign_list")).content.decode()


def test_shared_campaigns_do_not_count_against_the_readers_campaign_cap(client, settings, campaign, carol):
    settings.LOREMASTER_CAMPAIGNS_PER_READER = 1
    client.force_login(carol)
    response = client.post(reverse("campaign_create"), {"title": "Carol's first", "narration_length": ""})
    assert response.status_code == 302
    assert Campaign.objects.filter(owner=carol).count() == 1


# ------------------------------------------------------------ The play page

def test_the_play_page_shows_the_game_masters_controls_to_the_game_master_only(client, alice, campaign, carol, walt):
    story(campaign, "I ring the bell.", "The bell tolls under the water.")
    client.force_login(alice)
    gm = client.get(_url("campaign_play", campaign)).content.decode()
    for control in ('id="undo-button"', 'id="retry-inline"', 'id="memory-form"', 'id="state-form"',
                    _url("library", campaign), _url("campaign_edit", campaign), _url("campaign_export_bundle", campaign),
                    'id="delete-button"', 'id="turn-form"', _url("campaign_members", campaign)):
        assert control in gm, control
    client.force_login(carol)
    player = client.get(_url("campaign_play", campaign)).content.decode()
    for control in ('id="undo-button"', 'id="retry-inline"', 'id="memory-form"', 'id="state-form"',
                    _url("library", campaign), _url("campaign_edit", campaign), _url("campaign_export_bundle", campaign),
                    'id="delete-button"', _url("action_edit", campaign, action_id=campaign.head_id)):
        assert control not in player, control
    assert 'id="turn-form"' in player and 'id="continue-button"' in player
    assert _url("campaign_members", campaign) in player and "The bell tolls" in player
    client.force_login(walt)
    watcher = client.get(_url("campaign_play", campaign)).content.decode()
    assert 'id="turn-form"' not in watcher and 'id="continue-button"' not in watcher
    assert "You are watching this story" in watcher


def test_a_players_turn_answers_with_the_players_story_not_the_game_masters(client, campaign, carol, endpoint):
    campaign.endpoint = endpoint
    campaign.save()
    story(campaign, "I ring the bell.", "The bell tolls under the water.")
    client.force_login(carol)
    response = client.post(_url("turn_submit", campaign), {"text": ""}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert 'id="undo-button"' not in response.content.decode()


def test_memberships_are_in_the_admin_and_inline_on_their_campaign(client, campaign, carol):
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    listing = client.get(reverse("admin:storyapp_membership_changelist")).content.decode()
    assert "carol" in listing and "Wren" in listing
    page = client.get(reverse("admin:storyapp_campaign_change", args=[campaign.pk])).content.decode()
    assert 'value="Wren"' in page
