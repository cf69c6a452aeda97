"""A heading trail is bounded in what it stores, whatever the file (issue 13,
finding 2): every passage carries its trail, in its row and in the lexical
index, so an unbounded trail multiplied a small file into hundreds of MB."""

import pytest
from django.db import connection

from contextbuild.tokens import count_tokens
from knowledge.chunking import (
    ELLIPSIS,
    HEADING_CHARS,
    TRAIL_CHARS,
    TRAIL_SEPARATOR,
    chunk_text,
)
from knowledge.models import KnowledgeChunk, KnowledgeSource


def one_long_title_over_many_sections():
    """The issue's file: one long `#` heading over 500 short `##` sections
    (60 KB; 24.8 MB of passages before the bound)."""
    title = "# " + "The endless title of the realm " * 1600
    return title + "\n\n" + "".join(f"## Part {i}\nA line.\n\n" for i in range(500))


def deep_long_titles_over_many_sections():
    """Five nested long headings over 1,500 tiny sections (104 KB; 120 MB of
    passages before the bound)."""
    titles = "".join("#" * level + " " + f"Level {level} " * 2000 + "\n\n" for level in range(1, 6))
    return titles + "".join(f"###### S{i}\nx.\n\n" for i in range(1500))


HOSTILE = [one_long_title_over_many_sections, deep_long_titles_over_many_sections]


def chunks(text):
    return chunk_text(text, count=count_tokens)


@pytest.mark.parametrize("make", HOSTILE)
def test_no_trail_stores_more_than_its_bound(make):
    passages = chunks(make())
    assert passages
    assert all(len(p.heading_path) <= TRAIL_CHARS for p in passages)


@pytest.mark.parametrize(
    ("text", "trail"),
    [
        ("# " + "a" * 500 + "\n\nBody.", "a" * (HEADING_CHARS - 1) + ELLIPSIS),
        ("b" * 500 + "\n===\n\nBody.", "b" * (HEADING_CHARS - 1) + ELLIPSIS),
        ("# " + "word " * 100 + "\n\nBody.", ("word " * 20).strip() + ELLIPSIS),
        ("# " + "a" * 100 + "\n\nBody.", "a" * 100),
    ],
    ids=["atx", "setext", "words", "exactly-the-limit"],
)
def test_a_long_heading_is_cut_with_a_marker(text, trail):
    assert [p.heading_path for p in chunks(text)] == [trail]


def test_a_long_trail_keeps_its_nearest_headings():
    levels = [f"Level {n} " + "x" * 60 for n in range(1, 7)]
    text = "".join("#" * n + " " + title + "\n\n" for n, title in enumerate(levels, 1)) + "Body."
    (passage,) = chunks(text)
    assert passage.heading_path == TRAIL_SEPARATOR.join([ELLIPSIS, *levels[-2:]])
    assert len(passage.heading_path) <= TRAIL_CHARS


def test_a_trail_within_the_bound_is_kept_whole():
    levels = ["Westhaven", "The Harbour", "Tides", "Spring", "Neap", "Storm surge"]
    text = "".join("#" * n + " " + title + "\n\n" for n, title in enumerate(levels, 1)) + "Body."
    assert [p.heading_path for p in chunks(text)] == [TRAIL_SEPARATOR.join(levels)]


@pytest.mark.django_db
@pytest.mark.parametrize("make", HOSTILE)
def test_a_hostile_file_stores_a_small_multiple_of_its_size(campaign, library, make):
    """The rows and the full-text index both stay within 3× the file."""
    text = make()
    size = len(text.encode())
    source = library(campaign, text)
    assert source.index_state == KnowledgeSource.IndexState.READY
    rows = KnowledgeChunk.objects.filter(source=source).values_list("heading_path", "text")
    stored = sum(len(path.encode()) + len(body.encode()) for path, body in rows)
    assert stored <= 3 * size
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT coalesce(sum(length(block)), 0) FROM knowledge_chunk_fts_data")
            (index_bytes,) = cursor.fetchone()
        assert index_bytes <= 3 * size
