"""Turn order in a shared campaign: free play's waiting actions, rounds
answered by one narration, turns in seat order, their timers, and the game
master's controls. Alice is the game master; Bob (seat Tam) and Carol
(seat Wren) are players. Narrations run on the loopback demo server where
the test commits, as a worker would run them.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from storyapp import lineage, services, turnorder
from storyapp.access import place_in
from storyapp.models import Action, Campaign, Membership, TurnClock, WaitingTurn
from tests.factories import ActionFactory, CampaignFactory, MembershipFactory, UserFactory

HTMX = {"HX-Request": "true"}


@pytest.fixture
def carol(db):
    return UserFactory(username="carol")


@pytest.fixture
def table(campaign, bob, carol):
    """Alice's campaign with Bob and Carol at it, in the order they joined."""
    MembershipFactory(campaign=campaign, user=bob, seat_name="Tam")
    MembershipFactory(campaign=campaign, user=carol, seat_name="Wren")
    return campaign


def _mode(campaign, mode, seconds=0):
    Campaign.objects.filter(pk=campaign.pk).update(turn_mode=mode, turn_seconds=seconds)
    campaign.refresh_from_db()


def act(campaign, user, text, *, now=None):
    turnorder.submit(place=place_in(campaign, user), text=text, now=now or timezone.now())
    campaign.refresh_from_db()


def _story(campaign):
    campaign.refresh_from_db()
    return [(a.kind, a.text if a.kind == Action.Kind.PLAYER else a.status, a.seat_name)
            for a in lineage.tail(campaign.pk, campaign.head_id, 100)]


def _narrated(campaign):
    return [a.text for a in lineage.tail(campaign.pk, campaign.head_id, 100) if a.kind == Action.Kind.PLAYER]


DONE = Action.Status.DONE
PENDING = Action.Status.PENDING
PLAYER, AI = Action.Kind.PLAYER, Action.Kind.AI


# ---------------------------------------------------------------- free play

def test_an_action_sent_while_the_narrator_writes_waits_and_is_narrated_after_it(
    table, alice, bob, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as first_narration:
        act(table, alice, "The bell tolls.")
    act(table, bob, "Tam climbs the tower.")  # not refused: kept for its place
    assert _story(table) == [(PLAYER, "The bell tolls.", ""), (AI, PENDING, "")]
    [waiting] = WaitingTurn.objects.filter(campaign=table)
    assert (waiting.text, waiting.author, waiting.seat_name) == ("Tam climbs the tower.", bob, "Tam")
    with django_capture_on_commit_callbacks(execute=True):
        for callback in first_narration:
            callback()
    assert _story(table) == [
        (PLAYER, "The bell tolls.", ""), (AI, DONE, ""), (PLAYER, "Tam climbs the tower.", "Tam"), (AI, DONE, ""),
    ]
    assert not WaitingTurn.objects.filter(campaign=table).exists()
    assert Action.objects.get(text="Tam climbs the tower.").author == bob


def test_waiting_actions_are_narrated_one_narration_each_in_arrival_order(
    table, alice, bob, carol, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as first_narration:
        act(table, bob, "One.")
    act(table, carol, "Two.")
    act(table, alice, "Three.")
    act(table, bob, "Four.")
    with django_capture_on_commit_callbacks(execute=True):
        for callback in first_narration:
            callback()
    story = _story(table)
    assert [text for kind, text, _ in story if kind == PLAYER] == ["One.", "Two.", "Three.", "Four."]
    assert [kind for kind, _, _ in story] == [PLAYER, AI] * 4
    assert Action.objects.filter(campaign=table, kind=AI).count() == 4
    assert Action.objects.filter(campaign=table, kind=PLAYER).count() == 4


def test_a_lone_readers_turn_is_still_refused_while_the_narrator_writes(campaign, alice):
    act(campaign, alice, "One.")
    with pytest.raises(services.TurnRefused, match="still writing"):
        act(campaign, alice, "Two.")
    assert not WaitingTurn.objects.exists() and not TurnClock.objects.exists()


def test_a_player_sending_while_the_narrator_writes_is_answered_200_with_the_action_waiting(client, table, bob):
    act(table, table.owner, "The bell tolls.")
    client.force_login(bob)
    page = client.post(reverse("turn_submit", args=[table.pk]), {"text": "Tam waits."}, headers=HTMX)
    assert page.status_code == 200
    assert "1 action waiting for the narrator" in page.content.decode()


def test_a_watcher_cannot_send(client, table):
    watcher = MembershipFactory(campaign=table, role=Membership.Role.WATCHER).user
    client.force_login(watcher)
    assert client.post(reverse("turn_submit", args=[table.pk]), {"text": "Boo."}).status_code == 403
    assert not Action.objects.filter(campaign=table).exists()


def test_an_open_round_left_for_free_play_is_narrated_with_the_next_action(
    table, alice, bob, carol, django_capture_on_commit_callbacks
):
    _mode(table, Campaign.TurnMode.ROUNDS)
    act(table, bob, "Tam draws his sword.")
    turnorder.order_set(campaign=table, mode=Campaign.TurnMode.FREE, seconds=0, now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        act(table, carol, "Wren hides.")
    assert _story(table) == [(PLAYER, "Tam draws his sword.", "Tam"), (PLAYER, "Wren hides.", "Wren"), (AI, DONE, "")]


# ------------------------------------------------------------------- rounds

def test_a_round_is_answered_by_one_narration_once_every_player_has_acted(
    table, alice, bob, carol, django_capture_on_commit_callbacks
):
    _mode(table, Campaign.TurnMode.ROUNDS)
    with django_capture_on_commit_callbacks(execute=True):
        act(table, bob, "Tam draws his sword.")
        act(table, alice, "A storm gathers.")
        assert not Action.objects.filter(campaign=table, kind=AI).exists()
        act(table, carol, "Wren hides.")
    assert _story(table) == [
        (PLAYER, "Tam draws his sword.", "Tam"), (PLAYER, "A storm gathers.", ""), (PLAYER, "Wren hides.", "Wren"),
        (AI, DONE, ""),
    ]


def test_a_second_action_from_the_same_seat_in_a_round_is_refused(table, alice, bob):
    _mode(table, Campaign.TurnMode.ROUNDS)
    act(table, bob, "Tam draws his sword.")
    with pytest.raises(services.TurnRefused, match="already acted in this round"):
        act(table, bob, "Tam swings.")
    act(table, alice, "A storm gathers.")
    with pytest.raises(services.TurnRefused, match="already acted in this round"):
        act(table, alice, "Lightning.")
    assert _narrated(table) == ["Tam draws his sword.", "A storm gathers."]


def test_a_round_closes_when_the_others_pass(table, bob, carol, django_capture_on_commit_callbacks):
    _mode(table, Campaign.TurnMode.ROUNDS)
    act(table, bob, "Tam draws his sword.")
    with django_capture_on_commit_callbacks(execute=True):
        turnorder.turn_pass(place=place_in(table, carol), now=timezone.now())
    assert _story(table) == [(PLAYER, "Tam draws his sword.", "Tam"), (AI, DONE, "")]
    assert TurnClock.objects.get(campaign=table).passed == []


def test_a_seat_that_passed_cannot_act_in_the_same_round(table, bob):
    _mode(table, Campaign.TurnMode.ROUNDS)
    turnorder.turn_pass(place=place_in(table, bob), now=timezone.now())
    with pytest.raises(services.TurnRefused, match="already acted in this round"):
        act(table, bob, "Tam changes his mind.")


def test_the_game_master_closes_the_round_and_later_actions_start_the_next(
    table, alice, bob, carol, django_capture_on_commit_callbacks
):
    _mode(table, Campaign.TurnMode.ROUNDS)
    act(table, bob, "Tam draws his sword.")
    with django_capture_on_commit_callbacks() as round_narration:
        turnorder.round_close(campaign=table, now=timezone.now())
    # The round's narration is being written: Carol's action is the next round's.
    act(table, carol, "Wren hides.")
    act(table, bob, "Tam follows.")
    with pytest.raises(services.TurnRefused, match="already acted in this round"):
        act(table, bob, "Tam again.")
    with pytest.raises(services.TurnRefused, match="still answering"):
        turnorder.round_close(campaign=table, now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        for callback in round_narration:
            callback()
    assert _story(table) == [
        (PLAYER, "Tam draws his sword.", "Tam"), (AI, DONE, ""),
        (PLAYER, "Wren hides.", "Wren"), (PLAYER, "Tam follows.", "Tam"), (AI, DONE, ""),
    ]


def test_a_round_closes_when_its_timer_runs_out(table, bob, django_capture_on_commit_callbacks):
    _mode(table, Campaign.TurnMode.ROUNDS, seconds=60)
    start = timezone.now()
    act(table, bob, "Tam draws his sword.", now=start)
    turnorder.settle(campaign=table, now=start + timedelta(seconds=59))
    assert not Action.objects.filter(campaign=table, kind=AI).exists()
    assert turnorder.turn_state(table, now=start + timedelta(seconds=20)).seconds_left == 40
    with django_capture_on_commit_callbacks(execute=True):
        turnorder.on_sweep(now=start + timedelta(seconds=61))
        turnorder.on_sweep(now=start + timedelta(seconds=62))  # twice: still one narration
    assert _story(table) == [(PLAYER, "Tam draws his sword.", "Tam"), (AI, DONE, "")]


@pytest.fixture
def elsewhere(table, settings):
    """A narration of alice's other story holding her one narration slot."""
    settings.LOREMASTER_NARRATIONS_PER_READER = 1
    return ActionFactory(campaign=CampaignFactory(owner=table.owner), kind=AI, text="", status=PENDING)


def _round_timed_out_at_the_cap(table, bob, carol, elsewhere):
    _mode(table, Campaign.TurnMode.ROUNDS, seconds=60)
    start = timezone.now()
    act(table, bob, "Tam draws his sword.", now=start)
    turnorder.on_sweep(now=start + timedelta(seconds=61))
    turnorder.on_sweep(now=start + timedelta(seconds=200))
    assert not Action.objects.filter(campaign=table, kind=AI).exists()
    assert TurnClock.objects.get(campaign=table).closed
    assert turnorder.turn_state(table, now=start + timedelta(seconds=200)).closed
    # Closed: what is sent now is the next round's, and waits with it.
    act(table, carol, "Wren lights a torch.", now=start + timedelta(seconds=210))
    with pytest.raises(services.TurnRefused, match="The round is closed"):
        act(table, bob, "Tam strikes.", now=start + timedelta(seconds=211))
    assert _narrated(table) == ["Tam draws his sword."]
    Action.objects.filter(pk=elsewhere.pk).update(status=DONE, text="Far away, the tide turns.")
    return start


def test_a_round_timed_out_at_the_narration_cap_is_narrated_when_a_narration_ends(
    table, bob, carol, elsewhere, django_capture_on_commit_callbacks,
):
    start = _round_timed_out_at_the_cap(table, bob, carol, elsewhere)
    with django_capture_on_commit_callbacks(execute=True):
        turnorder.after_narration(action_id=elsewhere.pk, now=start + timedelta(seconds=220))
    assert _story(table)[:2] == [(PLAYER, "Tam draws his sword.", "Tam"), (AI, DONE, "")]
    assert not turnorder.turn_state(table, now=start + timedelta(seconds=220)).closed
    # The narration ended: the round it kept waiting opens with Wren's action.
    assert _narrated(table)[-1] == "Wren lights a torch." and not WaitingTurn.objects.exists()


def test_a_round_timed_out_at_the_narration_cap_is_narrated_by_the_sweep_once_a_slot_is_free(
    table, bob, carol, elsewhere, django_capture_on_commit_callbacks,
):
    start = _round_timed_out_at_the_cap(table, bob, carol, elsewhere)
    with django_capture_on_commit_callbacks(execute=True):
        turnorder.on_sweep(now=start + timedelta(seconds=220))
        turnorder.on_sweep(now=start + timedelta(seconds=221))  # twice: still one narration
    assert Action.objects.filter(campaign=table, kind=AI).count() == 1
    assert _story(table)[:2] == [(PLAYER, "Tam draws his sword.", "Tam"), (AI, DONE, "")]


def test_an_empty_round_whose_timer_runs_out_starts_again_without_a_narration(table):
    _mode(table, Campaign.TurnMode.ROUNDS, seconds=60)
    start = timezone.now()
    turnorder.settle(campaign=table, now=start)
    turnorder.on_sweep(now=start + timedelta(seconds=61))
    assert not Action.objects.filter(campaign=table).exists()
    assert TurnClock.objects.get(campaign=table).started == start + timedelta(seconds=61)


def test_an_empty_action_in_a_round_is_refused_with_the_way_to_pass(table, bob):
    _mode(table, Campaign.TurnMode.ROUNDS)
    with pytest.raises(services.TurnRefused, match="or pass"):
        act(table, bob, "  ")


# -------------------------------------------------------------------- turns

def test_seats_act_in_the_order_they_joined(table, bob, carol, django_capture_on_commit_callbacks):
    _mode(table, Campaign.TurnMode.TURNS)
    assert turnorder.turn_state(table, now=timezone.now()).whose_turn.name == "Tam"
    with pytest.raises(services.TurnRefused, match="It is Tam's turn"):
        act(table, carol, "Wren jumps ahead.")
    with django_capture_on_commit_callbacks(execute=True):
        act(table, bob, "Tam knocks.")
    assert turnorder.turn_state(table, now=timezone.now()).whose_turn.name == "Wren"
    with pytest.raises(services.TurnRefused, match="It is Wren's turn"):
        act(table, bob, "Tam knocks again.")
    with django_capture_on_commit_callbacks(execute=True):
        act(table, carol, "Wren listens.")
    assert turnorder.turn_state(table, now=timezone.now()).whose_turn.name == "Tam"
    assert _narrated(table) == ["Tam knocks.", "Wren listens."]


def test_the_next_seat_may_act_while_the_last_one_is_narrated_and_waits_for_it(
    table, bob, carol, django_capture_on_commit_callbacks
):
    _mode(table, Campaign.TurnMode.TURNS)
    with django_capture_on_commit_callbacks() as narration:
        act(table, bob, "Tam knocks.")
    act(table, carol, "Wren listens.")
    with django_capture_on_commit_callbacks(execute=True):
        for callback in narration:
            callback()
    assert [kind for kind, _, _ in _story(table)] == [PLAYER, AI, PLAYER, AI]
    assert _narrated(table) == ["Tam knocks.", "Wren listens."]


def test_the_game_master_acts_at_any_time_without_taking_a_turn(table, alice, bob, django_capture_on_commit_callbacks):
    _mode(table, Campaign.TurnMode.TURNS)
    with django_capture_on_commit_callbacks(execute=True):
        act(table, alice, "Thunder.")
    assert turnorder.turn_state(table, now=timezone.now()).whose_turn.name == "Tam"
    assert _narrated(table) == ["Thunder."]


def test_a_seat_that_does_not_act_in_time_is_skipped(table, bob, carol):
    _mode(table, Campaign.TurnMode.TURNS, seconds=30)
    start = timezone.now()
    turnorder.settle(campaign=table, now=start)
    turnorder.settle(campaign=table, now=start + timedelta(seconds=29))
    assert turnorder.turn_state(table, now=start + timedelta(seconds=29)).whose_turn.name == "Tam"
    with pytest.raises(services.TurnRefused, match="It is Wren's turn"):
        act(table, bob, "Tam, too late.", now=start + timedelta(seconds=31))
    state = turnorder.turn_state(table, now=start + timedelta(seconds=40))
    assert state.whose_turn.name == "Wren" and state.seconds_left == 20


def test_a_late_check_skips_as_many_seats_as_the_timer_did(table, bob, carol):
    _mode(table, Campaign.TurnMode.TURNS, seconds=30)
    start = timezone.now()
    turnorder.settle(campaign=table, now=start)
    turnorder.on_sweep(now=start + timedelta(seconds=95))  # three turns gone: Tam, Wren, Tam
    turnorder.on_sweep(now=start + timedelta(seconds=95))
    state = turnorder.turn_state(table, now=start + timedelta(seconds=95))
    assert state.whose_turn.name == "Wren" and state.seconds_left == 25


def test_a_player_passes_their_turn(table, bob, carol):
    _mode(table, Campaign.TurnMode.TURNS)
    with pytest.raises(services.TurnRefused, match="It is Tam's turn"):
        turnorder.turn_pass(place=place_in(table, carol), now=timezone.now())
    turnorder.turn_pass(place=place_in(table, bob), now=timezone.now())
    assert turnorder.turn_state(table, now=timezone.now()).whose_turn.name == "Wren"


def test_the_turn_timer_waits_while_the_narrator_writes(table, bob):
    _mode(table, Campaign.TurnMode.TURNS, seconds=30)
    start = timezone.now()
    act(table, bob, "Tam knocks.", now=start)
    turnorder.settle(campaign=table, now=start + timedelta(seconds=300))
    state = turnorder.turn_state(table, now=start + timedelta(seconds=300))
    assert state.whose_turn.name == "Wren" and state.seconds_left is None


def test_passing_in_free_play_and_the_game_master_passing_are_refused(table, alice, bob):
    with pytest.raises(services.TurnRefused, match="nothing to pass"):
        turnorder.turn_pass(place=place_in(table, bob), now=timezone.now())
    with pytest.raises(services.TurnRefused, match="Only players pass"):
        turnorder.turn_pass(place=place_in(table, alice), now=timezone.now())


# ----------------------------------------------------- the game master's controls

def test_the_game_master_chooses_the_turn_order_and_its_timer(client, table, alice):
    client.force_login(alice)
    page = client.post(reverse("campaign_turn_order", args=[table.pk]), {"turn_mode": "turns", "turn_seconds": 45},
                       headers=HTMX)
    assert page.status_code == 200
    table.refresh_from_db()
    assert (table.turn_mode, table.turn_seconds) == ("turns", 45)
    assert "It is Tam's turn." in page.content.decode()
    refused = client.post(reverse("campaign_turn_order", args=[table.pk]), {"turn_mode": "chaos", "turn_seconds": 5},
                          headers=HTMX)
    assert refused.status_code == 400


def test_players_cannot_choose_the_turn_order_or_close_a_round(client, table, bob):
    _mode(table, Campaign.TurnMode.ROUNDS)
    client.force_login(bob)
    assert client.post(reverse("campaign_turn_order", args=[table.pk]),
                       {"turn_mode": "free", "turn_seconds": 0}).status_code == 403
    assert client.post(reverse("round_close", args=[table.pk])).status_code == 403
    table.refresh_from_db()
    assert table.turn_mode == "rounds"


def test_the_game_master_closes_a_round_from_the_page(client, table, alice, bob, django_capture_on_commit_callbacks):
    _mode(table, Campaign.TurnMode.ROUNDS)
    act(table, bob, "Tam draws his sword.")
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(reverse("round_close", args=[table.pk]), headers=HTMX)
    assert page.status_code == 200
    assert _story(table)[-1] == (AI, DONE, "")


def test_a_player_passes_from_the_page_and_a_refusal_is_shown(client, table, bob, carol):
    _mode(table, Campaign.TurnMode.TURNS)
    client.force_login(carol)
    refused = client.post(reverse("turn_pass", args=[table.pk]), headers=HTMX)
    assert refused.status_code == 409 and "It is Tam&#x27;s turn" in refused.content.decode()
    client.force_login(bob)
    assert client.post(reverse("turn_pass", args=[table.pk]), headers=HTMX).status_code == 200
    assert turnorder.turn_state(table, now=timezone.now()).whose_turn.name == "Wren"


def test_the_play_page_says_whose_turn_it_is_and_who_has_acted(client, table, bob, carol):
    _mode(table, Campaign.TurnMode.TURNS)
    client.force_login(carol)
    page = client.get(reverse("campaign_play", args=[table.pk])).content.decode()
    assert "It is Tam's turn." in page and 'id="pass-button"' in page
    assert 'id="turn-mode"' not in page and 'id="close-round-button"' not in page
    client.force_login(table.owner)
    assert 'id="pass-button"' not in client.get(reverse("campaign_play", args=[table.pk])).content.decode()
    client.force_login(bob)
    assert "It is your turn (Tam)." in client.get(reverse("campaign_play", args=[table.pk])).content.decode()
    _mode(table, Campaign.TurnMode.ROUNDS)
    act(table, bob, "Tam draws his sword.")
    page = client.get(reverse("campaign_play", args=[table.pk])).content.decode()
    assert "Tam: acted" in page and "Wren: not yet" in page


def test_a_page_view_changes_nothing_though_a_timer_ran_out(client, table, bob, django_capture_on_commit_callbacks):
    """A GET never writes: an expired round is the sweep's to close (a
    live page refetches on every event, and would queue on the campaign's
    lock against every send)."""
    _mode(table, Campaign.TurnMode.ROUNDS, seconds=60)
    act(table, bob, "Tam draws his sword.", now=timezone.now() - timedelta(seconds=61))
    client.force_login(bob)
    with django_capture_on_commit_callbacks(execute=True):
        client.get(reverse("campaign_play", args=[table.pk]))
    assert _story(table) == [(PLAYER, "Tam draws his sword.", "Tam")]


def test_a_lone_readers_page_shows_no_turn_order(client, campaign, alice):
    client.force_login(alice)
    page = client.get(reverse("campaign_play", args=[campaign.pk])).content.decode()
    assert 'id="turn-order"' not in page
    assert not TurnClock.objects.exists()
