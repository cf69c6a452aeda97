"""Each seat's secrets reach the narrator in a section of their own, marked
as known only to that character and recorded with its audience."""

from contextbuild import build_context
from contextbuild.records import Secret
from contextbuild.secrets import LABEL, SHARE
from contextbuild.tokens import count_tokens
from tests.contextbuild.samples import turn


def seat_sections(built):
    return [s for s in built.report["sections"] if s["label"] == LABEL]


def test_each_seat_gets_one_section_headed_with_its_name_and_audience():
    built = build_context(turn(secrets=(
        Secret(seat="Mara", text="The map is forged.", origin="whisper"),
        Secret(seat="Ivo", text="Ivo owes the duke a debt.", title="Ivo's past"),
        Secret(seat="Mara", text="Mara can read the old script."),
    )))
    mara, ivo = seat_sections(built)
    assert (mara["audience"], ivo["audience"]) == ("Mara", "Ivo") and mara["block"] == "system"
    assert mara["text"].startswith("Known only to Mara:")
    assert "The map is forged." in mara["text"] and "old script" in mara["text"] and "debt" not in mara["text"]
    assert "whispered by the game master" in mara["text"] and "Ivo's past" in ivo["text"]
    assert mara["text"] in built.system_text and ivo["text"] in built.system_text
    assert [r["seat"] for r in built.report["secrets"]["used"]] == ["Mara", "Ivo", "Mara"]


def test_secrets_beyond_their_share_of_the_budget_are_dropped_and_reported():
    long = " ".join(["The duke hides a second key."] * 200)
    built = build_context(turn(secrets=(Secret(seat="Mara", text="Short."), Secret(seat="Ivo", text=long))))
    assert count_tokens(long) > built.report["tokens"]["budget"] * SHARE
    assert [s["audience"] for s in seat_sections(built)] == ["Mara"]
    assert [r["seat"] for r in built.report["secrets"]["dropped"]] == ["Ivo"]


def test_a_turn_without_secrets_has_no_secret_section_and_no_audience():
    built = build_context(turn())
    assert seat_sections(built) == [] and all("audience" not in s for s in built.report["sections"])
