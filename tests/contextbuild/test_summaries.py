"""The story summary's pure rules: requests, replies, the chain a prompt uses, merging."""

import pytest

from contextbuild.memories import recorded
from contextbuild.records import HistoryAction
from contextbuild.summaries import (
    STRIDE,
    StoredSummary,
    as_prompt_summary,
    chain,
    due,
    merge_plan,
    parse_reply,
    summary_request,
)
from contextbuild.tokens import count_tokens


def seg(id, start, through, depth, level=0, tokens=50, text=None):
    return StoredSummary(id=id, starts_after=start, covers_through=through, through_depth=depth, level=level,
                         text=text or f"summary {id}", tokens=tokens)


# Lineage A: actions 1..30 (ids = depth + 1); branch B leaves A after action 10 with ids 101..
A = set(range(1, 31))
B = set(range(1, 11)) | set(range(101, 121))
STORED = [
    seg("s1", None, 5, 4),
    seg("s2", 5, 10, 9),
    seg("s3", 10, 20, 19),          # on A only
    seg("b3", 10, 108, 17),         # on B only
    seg("m1", None, 10, 9, level=1),  # merges s1 and s2
]


@pytest.mark.parametrize(
    ("lineage", "expected"),
    [(A, ["m1", "s3"]), (B, ["m1", "b3"]), (set(range(1, 8)), ["s1"]), (set(range(1, 5)), [])],
)
def test_the_chain_follows_the_lineage_and_prefers_the_merged_summary(lineage, expected):
    assert [s.id for s in chain(STORED, lineage)] == expected


def test_a_chain_with_a_gap_uses_only_the_contiguous_newest_part():
    assert [s.id for s in chain([seg("s1", None, 5, 4), seg("s3", 10, 20, 19)], A)] == ["s3"]


def test_the_prompt_summary_joins_the_chain_oldest_first_and_says_what_it_covers():
    summary = as_prompt_summary(chain(STORED, A), limit_tokens=500, count=count_tokens)
    assert summary.text == "summary m1\n\nsummary s3"
    assert (summary.covers_through, summary.covers_actions) == (20, 20)
    assert [p["id"] for p in summary.parts] == ["m1", "s3"] and summary.parts[0]["level"] == 1
    assert as_prompt_summary((), limit_tokens=500, count=count_tokens) is None


def test_the_prompt_summary_stays_within_its_limit_whatever_the_model_wrote():
    long = [seg("s1", None, 5, 4, tokens=300, text="old " * 300), seg("s2", 5, 10, 9, tokens=300,
            text="middle " * 299 + "newest.")]
    summary = as_prompt_summary(long, limit_tokens=400, count=count_tokens)
    assert [p["id"] for p in summary.parts] == ["s2"], "the oldest part is left out"
    tiny = as_prompt_summary(long, limit_tokens=50, count=count_tokens)
    assert count_tokens(tiny.text) <= 50 and tiny.text.endswith("newest.")


@pytest.mark.parametrize(
    ("summarized", "dropped", "expected"),
    [(None, None, False), (None, 0, True), (9, 9 + STRIDE - 1, False), (9, 9 + STRIDE, True), (30, 12, False)],
)
def test_a_summary_is_due_at_once_then_every_stride_actions(summarized, dropped, expected):
    assert due(summarized_depth=summarized, dropped_through_depth=dropped) is expected


def test_the_oldest_segments_merge_when_the_chain_outgrows_its_share():
    picked = [seg(f"s{i}", i - 1 or None, i, i - 1, tokens=100) for i in range(1, 6)]
    assert merge_plan(picked, limit_tokens=500) == ()
    merged = merge_plan(picked, limit_tokens=400)
    assert [s.id for s in merged] == ["s1", "s2"]
    assert merge_plan(picked[:1], limit_tokens=10) == ()


@pytest.mark.parametrize(
    ("raw", "text", "facts"),
    [
        ("Summary: Mara reached the ferry.\nFacts:\n- Aldric is dead.\n- The seal is broken.",
         "Mara reached the ferry.", ("Aldric is dead.", "The seal is broken.")),
        ("**Summary:** Mara reached the ferry.\n\n**Facts:**\n1. Aldric is dead.\n2) The seal is broken.",
         "Mara reached the ferry.", ("Aldric is dead.", "The seal is broken.")),
        ("Mara reached the ferry.", "Mara reached the ferry.", ()),
        ('Summary: Mara left.\n<state>{"events": []}</state>', "Mara left.", ()),
        ("", "", ()),
    ],
)
def test_a_reply_is_read_whatever_its_format(raw, text, facts):
    reply = parse_reply(raw)
    assert (reply.text, reply.facts) == (text, facts)


def test_a_request_covers_the_oldest_actions_that_fit_and_at_least_one():
    stretch = [HistoryAction(id=i, kind="ai" if i % 2 else "player", text="word " * 100) for i in range(1, 11)]
    request = summary_request(stretch, protagonist="Mara", capacity=700, count=count_tokens)
    covered = [a.id for a in request.covered]
    assert covered == list(range(1, len(covered) + 1)) and 1 < len(covered) < 10
    assert sum(count_tokens(m["content"]) for m in request.messages) <= 700
    wider = summary_request(stretch, protagonist="Mara", capacity=700 + 120, count=count_tokens)
    assert len(wider.covered) == len(covered) + 1
    assert "Mara" in request.messages[0]["content"] and "third person" in request.messages[0]["content"].lower()
    assert request.messages[1]["content"].count("Narrator:") == (len(covered) + 1) // 2
    tiny = summary_request(stretch, protagonist="Mara", capacity=10, count=count_tokens)
    assert [a.id for a in tiny.covered] == [1]


def test_recorded_memories_say_what_the_accepted_events_established():
    state = {"entities": {"aldric": {"name": "Aldric", "status": "dead"}},
             "threads": {"seal": {"title": "Return the broken seal", "status": "resolved"}}}
    events = [
        {"type": "entity", "id": "aldric", "status": "dead"},
        {"type": "thread", "id": "seal", "status": "resolved"},
        {"type": "scene", "summary": "Mara boards the ferry", "location": "the ferry"},
        {"type": "entity", "id": "aldric", "status": "dead"},
        {"type": "entity", "id": "gull", "name": "A gull"},
    ]
    assert recorded(events, state, protagonist="Mara") == (
        "Aldric: dead.", "Resolved: Return the broken seal.", "Mara boards the ferry (the ferry).",
    )


def test_recorded_moves_and_items_say_what_the_state_applied():
    state = {"entities": {"mira": {"name": "Mira"}}}
    events = [
        {"type": "item", "id": "you", "item": "the rope", "change": "gained", "holder": "mira"},
        {"type": "move", "id": "you", "to": "the quay", "location": "the tower"},
        {"type": "item", "id": "mira", "item": "a lamp", "change": "lost"},
        {"type": "move", "id": ["not", "an", "id"], "to": "nowhere"},
    ]
    assert recorded(events, state, protagonist="Mara") == (
        "Mara gained the rope.", "Mara went to the quay.", "Mira lost a lamp.", "Mara went to nowhere.",
    )
