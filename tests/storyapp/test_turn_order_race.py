"""Players pressing Send at the same moment in a shared campaign: every
action is kept once, in one order, and narrated as its mode says.

The sends lock the campaign row, so they take their places one after
another; the narrations run in the sending threads as they commit (eager
tasks), on the loopback demo server. PostgreSQL only: SQLite takes its write
lock at BEGIN, so its sends never overlap.
"""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from storyapp import lineage, services, turnorder
from storyapp.access import place_in
from storyapp.models import Action, Campaign, WaitingTurn
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the race needs concurrent writers")

PLAYERS = 4


def _send_together(campaign, sends):
    """Runs each (user, text) send in its own thread, all released at once;
    returns each send's outcome: "kept" or the refusal."""
    start = threading.Barrier(len(sends))
    outcomes = {}

    def send(number, user, text):
        try:
            start.wait(timeout=10)
            turnorder.submit(place=place_in(campaign, user), text=text, now=timezone.now())
            outcomes[number] = "kept"
        except services.TurnRefused as exc:
            outcomes[number] = str(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(n, user, text)) for n, (user, text) in enumerate(sends)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return [outcomes.get(n) for n in range(len(sends))]


def _players(campaign):
    return [MembershipFactory(campaign=campaign, user=UserFactory(), seat_name=f"Seat {n}").user
            for n in range(PLAYERS)]


@pytest.mark.django_db(transaction=True)
def test_simultaneous_sends_in_free_play_are_each_kept_once_and_narrated_in_turn(campaign, model):
    players = _players(campaign)
    texts = [f"Player {n} acts." for n in range(PLAYERS)]
    assert _send_together(campaign, list(zip(players, texts, strict=True))) == ["kept"] * PLAYERS
    campaign.refresh_from_db()
    story = lineage.tail(campaign.pk, campaign.head_id, 100)
    assert [a.kind for a in story] == [Action.Kind.PLAYER, Action.Kind.AI] * PLAYERS
    assert sorted(a.text for a in story if a.kind == Action.Kind.PLAYER) == texts
    assert all(a.status == Action.Status.DONE for a in story if a.kind == Action.Kind.AI)
    assert Action.objects.filter(campaign=campaign, kind=Action.Kind.PLAYER).count() == PLAYERS
    assert Action.objects.filter(campaign=campaign, kind=Action.Kind.AI).count() == PLAYERS
    assert not WaitingTurn.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_simultaneous_sends_that_complete_a_round_are_answered_by_one_narration(campaign, model):
    Campaign.objects.filter(pk=campaign.pk).update(turn_mode=Campaign.TurnMode.ROUNDS)
    players = _players(campaign)
    texts = [f"Player {n} acts." for n in range(PLAYERS)]
    assert _send_together(campaign, list(zip(players, texts, strict=True))) == ["kept"] * PLAYERS
    campaign.refresh_from_db()
    story = lineage.tail(campaign.pk, campaign.head_id, 100)
    assert [a.kind for a in story] == [Action.Kind.PLAYER] * PLAYERS + [Action.Kind.AI]
    assert sorted(a.text for a in story[:-1]) == texts and story[-1].status == Action.Status.DONE
    assert Action.objects.filter(campaign=campaign).count() == PLAYERS + 1


@pytest.mark.django_db(transaction=True)
def test_one_seat_sending_twice_at_once_in_a_round_is_kept_once(campaign, model):
    Campaign.objects.filter(pk=campaign.pk).update(turn_mode=Campaign.TurnMode.ROUNDS)
    bob = _players(campaign)[0]
    outcomes = _send_together(campaign, [(bob, "Tam strikes."), (bob, "Tam strikes again.")])
    refused = [outcome for outcome in outcomes if outcome != "kept"]
    assert outcomes.count("kept") == 1 and len(refused) == 1
    assert "already acted in this round" in refused[0]
    assert Action.objects.filter(campaign=campaign, author=bob).count() == 1
