"""Chunking rules: a pure function, tested with no database."""

import re

import pytest

from contextbuild.tokens import count_tokens
from knowledge.chunking import chunk_text

WESTHAVEN = """# Westhaven

A port town on the salt road.

## The Harbour

Deep water and old stone.

### Tides

Tides run high in spring.

## The Market
Fish, salt and rope.
"""


def chunks(text, **options):
    return chunk_text(text, count=count_tokens, **options)


def test_each_passage_carries_its_heading_trail():
    trails = [(p.heading_path, p.text) for p in chunks(WESTHAVEN)]
    assert trails == [
        ("Westhaven", "A port town on the salt road."),
        ("Westhaven > The Harbour", "Deep water and old stone."),
        ("Westhaven > The Harbour > Tides", "Tides run high in spring."),
        ("Westhaven > The Market", "Fish, salt and rope."),
    ]


def test_passages_are_numbered_in_document_order():
    assert [p.index for p in chunks(WESTHAVEN)] == [0, 1, 2, 3]


def test_a_heading_with_nothing_under_it_emits_no_passage():
    passages = chunks("# Empty\n\n## Also empty\n\n## Full\n\nText.\n\n# Trailing\n")
    assert [(p.heading_path, p.text) for p in passages] == [("Empty > Full", "Text.")]


def test_a_hash_line_inside_a_fenced_code_block_is_not_a_heading():
    passages = chunks("# Spells\n\n```\n# not a heading\n```\n\nAfter.")
    assert {p.heading_path for p in passages} == {"Spells"}
    assert "# not a heading" in passages[0].text


def test_setext_headings_are_headings():
    passages = chunks("Westhaven\n=========\n\nPort.\n\nHarbour\n-------\n\nWater.")
    assert [(p.heading_path, p.text) for p in passages] == [("Westhaven", "Port."), ("Westhaven > Harbour", "Water.")]


def test_closing_hashes_and_extra_spaces_are_not_part_of_the_heading():
    assert chunks("##   The   Harbour  ##\n\nWater.")[0].heading_path == "The Harbour"


def test_plain_text_without_headings_chunks_by_paragraphs():
    paragraphs = [f"Paragraph {n} " + "word " * 120 for n in range(6)]
    passages = chunks("\n\n".join(paragraphs), target=200, maximum=300)
    assert all(p.heading_path == "" for p in passages)
    assert len(passages) == 6
    assert [p.text.split()[1] for p in passages] == [str(n) for n in range(6)]


def test_small_paragraphs_are_packed_together_up_to_the_target():
    text = "\n\n".join(f"Short paragraph number {n}." for n in range(40))
    passages = chunks(text, target=60, maximum=100)
    assert 1 < len(passages) < 40
    assert all(p.token_count <= 100 for p in passages)


def test_no_passage_exceeds_the_maximum_and_none_is_empty():
    text = "# Big\n\n" + " ".join(f"Sentence {n} is here and says a little." for n in range(800))
    passages = chunks(text, target=120, maximum=160)
    assert passages
    assert all(p.text.strip() for p in passages)
    assert all(count_tokens(p.text) <= 160 for p in passages)


def test_an_overlong_paragraph_is_split_at_sentence_ends():
    text = " ".join(f"The tide turned at hour {n}." for n in range(300))
    passages = chunks(text, target=100, maximum=150)
    assert len(passages) > 1
    assert all(p.text.endswith(".") for p in passages)


def test_a_sentence_longer_than_the_maximum_is_split_between_words_never_inside_one():
    words = [f"word{n}" for n in range(2000)]
    passages = chunks(" ".join(words), target=100, maximum=150)
    assert len(passages) > 1
    assert [w for p in passages for w in p.text.split()] == words


def test_a_single_word_longer_than_the_maximum_is_kept_whole():
    blob = "x" * 4000
    passages = chunks(f"Before.\n\n{blob}\n\nAfter.", target=50, maximum=80)
    assert blob in [p.text for p in passages]


def test_no_text_is_lost_or_duplicated():
    text = WESTHAVEN * 30 + " ".join(f"Line {n}." for n in range(500))
    passages = chunks(text, target=80, maximum=120)
    body = [line for line in text.split() if not line.startswith("#")]
    heading_words = set(re.findall(r"^#+ (.*)$", text, re.M))
    kept = [w for p in passages for w in p.text.split()]
    assert [w for w in body if w not in " ".join(heading_words).split()] == [
        w for w in kept if w not in " ".join(heading_words).split()
    ]


def test_the_same_text_gives_the_same_passages():
    text = WESTHAVEN * 50
    assert chunks(text) == chunks(text)


def test_windows_newlines_and_a_byte_order_mark_change_nothing():
    assert chunks("\ufeff" + WESTHAVEN.replace("\n", "\r\n")) == chunks(WESTHAVEN)


def test_the_recorded_token_count_is_never_below_the_true_count():
    text = WESTHAVEN * 20 + "\n\n".join(f"Item {n}: 1234 coins. Then {n * 7} more!" for n in range(200))
    for passage in chunks(text, target=60, maximum=90):
        assert passage.token_count >= count_tokens(passage.text)


@pytest.mark.parametrize("text", ["", "   \n\n  ", "# Only a heading\n", "## A\n### B\n"])
def test_text_without_content_gives_no_passages(text):
    assert chunks(text) == []


@pytest.mark.parametrize(("target", "maximum"), [(0, 10), (20, 10)])
def test_a_target_above_the_maximum_is_refused(target, maximum):
    with pytest.raises(ValueError):
        chunks("text", target=target, maximum=maximum)


def tiny_sections(count: int) -> str:
    return "# Atlas\n\n" + "".join(f"## Place {i}\n\nStone {i}.\n\n" for i in range(count))


def test_in_a_file_of_many_tiny_sections_they_are_joined_under_their_shared_trail():
    passages = chunks(tiny_sections(1500))
    assert 50 < len(passages) < 300  # 1,500 sections
    assert [p.index for p in passages] == list(range(len(passages)))
    first = passages[0]
    assert first.heading_path == "Atlas" and first.text.startswith("Place 0\nStone 0.\n\nPlace 1\nStone 1.")
    assert all(p.token_count <= 280 for p in passages)
    joined = "\n\n".join(p.text for p in passages)
    assert all(f"Place {i}\nStone {i}." in joined for i in range(1500))


def test_a_smaller_file_keeps_each_tiny_section_as_its_own_passage():
    passages = chunks(tiny_sections(100))
    assert len(passages) == 100 and passages[7].heading_path == "Atlas > Place 7"
    assert len(chunks(tiny_sections(100), join_from=0)) < 20
