"""`manage.py share_campaign`: the members page's invitations and removals
from the command line, refused with the same reasons."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.factories import CampaignFactory, MembershipFactory


@pytest.fixture
def campaign(alice):
    return CampaignFactory(owner=alice, title="The Drowned Bell")


def _share(campaign, *args):
    out = StringIO()
    call_command("share_campaign", "--campaign", str(campaign.pk), *args, stdout=out)
    return out.getvalue()


def _seats(campaign):
    return {m.user.username: (m.role, m.seat_name, m.seat_description) for m in campaign.memberships.select_related("user")}


def test_a_reader_is_seated_as_a_player(campaign, bob):
    out = _share(campaign, "--user", "bob", "--role", "player", "--seat", "Tam", "--seat-description", "A smith.")
    assert _seats(campaign) == {"bob": ("player", "Tam", "A smith.")}
    assert "bob is a player as Tam in “The Drowned Bell”" in out


def test_running_it_again_changes_the_members_role_and_seat(campaign, bob):
    _share(campaign, "--user", "bob", "--role", "player", "--seat", "Tam")
    _share(campaign, "--user", "bob", "--role", "watcher")
    assert _seats(campaign) == {"bob": ("watcher", "", "")}


def test_remove_takes_the_reader_out(campaign, bob):
    _share(campaign, "--user", "bob", "--role", "watcher")
    assert "no longer a member" in _share(campaign, "--user", "bob", "--remove")
    assert _seats(campaign) == {}


@pytest.mark.parametrize(("args", "refusal"), [
    (("--user", "nobody", "--role", "watcher"), "No reader is called “nobody”."),
    (("--user", "alice", "--role", "player", "--seat", "Mara"), "alice is this story's game master already."),
    (("--user", "bob", "--role", "player", "--seat", "WREN"), "already called “WREN”"),
    (("--user", "bob", "--role", "player"), "A player needs a seat"),
    (("--user", "bob"), "Give --role player or --role watcher"),
    (("--user", "bob", "--remove"), "bob is not a member of this story."),
    (("--user", "alice", "--remove"), "The game master cannot leave their own story"),
])
def test_refusals_are_command_errors_and_store_nothing(campaign, bob, args, refusal):
    MembershipFactory(campaign=campaign, seat_name="Wren")
    before = _seats(campaign)
    with pytest.raises(CommandError, match=refusal):
        _share(campaign, *args)
    assert _seats(campaign) == before


def test_an_unknown_campaign_is_a_command_error(db, bob):
    with pytest.raises(CommandError, match="No campaign with id 987654."):
        call_command("share_campaign", "--campaign", "987654", "--user", "bob", "--role", "watcher")
