"""bin/load --profile shared-play: how it reads what each member's page heard."""

from scripts.sharedplay import Heard, latencies

CREATED = 1_000.0
#: id, campaign, audience, created (as the profile reads them from the database).
EVENTS = [
    [5, 1, "", CREATED],  # before the page was rendered: the page has it already
    [6, 1, "", CREATED],
    [7, 1, "Mara", CREATED],  # for Mara's seat alone
    [8, 1, "gm", CREATED],  # for the game master alone
    [9, 2, "", CREATED],  # another campaign
]


def test_each_page_is_measured_on_the_events_it_may_see_after_its_position():
    mara = Heard(name="mara", campaign=1, seat="Mara", after=5, at={6: CREATED + 0.2, 7: CREATED + 0.4})
    gm = Heard(name="gm", campaign=1, game_master=True, after=5,
               at={6: CREATED + 0.1, 7: CREATED + 0.3, 8: CREATED + 1.5})

    samples, missing = latencies([mara, gm], EVENTS)

    assert sorted(round(ms) for ms in samples) == [100, 200, 300, 400, 1500]
    assert missing == []


def test_an_event_a_page_may_see_but_never_received_is_missing():
    tom = Heard(name="tom", campaign=1, seat="Tom", after=5, at={6: CREATED + 0.2})
    gm = Heard(name="gm", campaign=1, game_master=True, after=5, at={6: CREATED + 0.1, 8: CREATED + 0.1})

    samples, missing = latencies([tom, gm], EVENTS)

    assert len(samples) == 3
    assert missing == ["gm never received event #7"]
