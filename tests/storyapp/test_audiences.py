"""What each member may read of a stored report: the filtering alone, on plain dicts."""

import pytest

from storyapp.audiences import HELD_NOTICE, Viewer, messages_for, notice, report_for

DIRECTION = "Let the storm break when Ivo opens the chest."
IVO = "Known only to Ivo:\n<imported>\nIvo stole the chest key.\n</imported>"
HIDDEN_PASSAGE = "[crypt.md · passage 1 [narrator only]]\nThe crown lies under the third pillar."
REPORT = {
    "sections": [
        {"label": "narrator", "block": "system", "text": "Narrate."},
        {"label": "director_note", "block": "system", "text": DIRECTION, "audience": "gm"},
        {"label": "seat_secrets", "block": "system", "text": IVO, "audience": "Ivo"},
        {"label": "always_canon", "block": "system", "text": f"Canon:\n<imported>\n{HIDDEN_PASSAGE}\n</imported>"},
        {"label": "world_info_before", "block": "system",
         "text": "World Info [narrator only]\n<imported>\nThe bells are a warning.\n</imported>"},
    ],
    "knowledge": {"used": [{"visibility": "hidden", "filename": "crypt.md", "rendered": HIDDEN_PASSAGE,
                            "text": "The crown lies under the third pillar."}, {"visibility": "visible"}]},
    "world_info": {"activated": [{"entry": "Bells", "narrator_only": True}, {"entry": "Harbour"}]},
    "secrets": {"used": [{"seat": "Ivo"}, {"seat": "Mara"}], "dropped": []},
    "prompt": {"mode": "chat", "system": DIRECTION, "messages": [{"content": DIRECTION}]},
}
SENT = [{"role": "system", "speaker": "System", "content": "\n\n".join(s["text"] for s in REPORT["sections"]),
         "hidden": True}]


@pytest.mark.parametrize(("viewer", "audience", "may"), [
    (Viewer(game_master=True), "gm", True),
    (Viewer(game_master=False, seat="Ivo"), "Ivo", True),
    (Viewer(game_master=False, seat="Ivo"), "Mara", False),
    (Viewer(game_master=False, seat="Ivo"), "gm", False),
    (Viewer(game_master=False, seat="Ivo"), "narrator", False),
    (Viewer(game_master=False), "", True),
    (Viewer(game_master=False), "Ivo", False),
])
def test_who_may_read_what(viewer, audience, may):
    assert viewer.may_read(audience) is may


def test_the_game_master_reads_the_report_as_stored():
    assert report_for(REPORT, Viewer(game_master=True)) is REPORT
    assert messages_for(SENT, REPORT, Viewer(game_master=True)) is SENT


@pytest.mark.parametrize("viewer", [Viewer(game_master=False, seat="Mara"), Viewer(game_master=False)])
def test_a_member_reads_no_direction_no_narrator_lore_and_no_other_seat(viewer):
    shown = report_for(REPORT, viewer)
    sent = messages_for(SENT, REPORT, viewer)
    everything = str(shown) + str(sent)
    for secret in (DIRECTION, "stole the chest key", "third pillar", "bells are a warning"):
        assert secret not in everything
    assert notice("gm") in everything and notice("Ivo") in everything and notice("narrator") in everything
    assert [r["entry"] for r in shown["world_info"]["activated"]] == ["Harbour"]
    assert shown["knowledge"]["used"] == [{"visibility": "visible"}]
    assert shown["prompt"] == {"mode": "chat", "template": ""}
    assert sent[0]["withheld"] and "Narrate." in sent[0]["content"]
    assert REPORT["sections"][1]["text"] == DIRECTION  # the stored report is left as it was


def test_a_player_reads_their_own_seat():
    shown = report_for(REPORT, Viewer(game_master=False, seat="Ivo"))
    assert "stole the chest key" in str(shown) and [r["seat"] for r in shown["secrets"]["used"]] == ["Ivo"]


def test_a_held_narration_replayed_in_a_prompt_is_withheld():
    report = {"sections": [{"label": "narration", "block": "history", "text": "The keeper lies."}]}
    shown = report_for(report, Viewer(game_master=False, seat="Ivo"), held=("The keeper lies.",))
    assert shown["sections"][0]["text"] == HELD_NOTICE
