"""A narration that repeats a narrator-only or one seat's passage is found out."""

import pytest

from contextbuild import build_context
from contextbuild.leaks import GAME_MASTER, MIN_WORDS, NARRATOR, Passage, find, secret_passages, words
from contextbuild.records import Secret
from tests.contextbuild.samples import candidate, knowledge, turn

SECRET = "The duke poisoned the well at midnight while the town slept below."


@pytest.mark.parametrize(("narration", "leaked"), [
    ("Rain falls. The Duke poisoned the well, at midnight! While the town slept. Nobody saw.", True),
    ("THE DUKE POISONED THE WELL AT MIDNIGHT WHILE THE TOWN slept.", True),
    # Seven words in a row are what any two texts may share.
    ("Somebody said the duke poisoned the well at midnight, but no.", False),
    ("The well at midnight is cold; the duke sleeps while the town dreams.", False),
    ("", False),
])
def test_a_long_shared_run_of_words_is_a_leak(narration, leaked):
    found = find(narration, [Passage("Mara", "seat_secrets", SECRET)])
    assert bool(found) is leaked
    if leaked:
        assert found[0].audience == "Mara" and len(found[0].words.split()) >= MIN_WORDS


def test_the_longest_shared_run_is_reported_once_per_passage():
    narration = "The duke poisoned the well at midnight while the town slept below, they say."
    [leak] = find(narration, [Passage(NARRATOR, "lore.md · passage 1", SECRET + " " + SECRET)])
    assert leak.words == " ".join(words(SECRET))
    assert leak.as_record() == {"audience": NARRATOR, "label": "lore.md · passage 1", "words": leak.words}


def test_apostrophes_and_case_do_not_hide_a_leak():
    assert find("the captain’s daughter stole the map from the old lighthouse",
                [Passage("Ivo", "s", "The Captain's daughter stole the map from the old lighthouse.")])


def test_the_secrets_of_a_built_prompt_are_read_back_from_its_report():
    hidden = candidate("h1", visibility="hidden", text=SECRET)
    built = build_context(turn(
        knowledge=knowledge(hidden, candidate("v1", classification="reference")),
        secrets=(Secret(seat="Mara", text="Mara is the duke's lost daughter and keeps his ring."),),
    ))
    passages = secret_passages(built.report)
    assert {(p.audience, p.text.strip()) for p in passages if p.audience == NARRATOR} == {(NARRATOR, SECRET)}
    [seat] = [p for p in passages if p.audience == "Mara"]
    assert "lost daughter" in seat.text and "Known only to" not in seat.text
    assert find("You learn it: Mara is the duke's lost daughter and keeps his ring.", passages)[0].audience == "Mara"


def test_public_and_game_master_sections_are_not_secrets():
    report = {"sections": [
        {"label": "narrator", "text": SECRET},
        {"label": "director_note", "text": SECRET, "audience": GAME_MASTER},
    ]}
    assert secret_passages(report) == []
