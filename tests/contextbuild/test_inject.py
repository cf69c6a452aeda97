import json
from dataclasses import replace

import pytest

from contextbuild import count_tokens, inject
from contextbuild.records import KnowledgeResult
from contextbuild.rules import HIDDEN_RULE, KNOWLEDGE_RULE
from tests.contextbuild.samples import candidate, knowledge

SEPARATOR = count_tokens("\n\n")


def labels(sections):
    return [section.label for section in sections]


def test_nothing_to_show_means_no_framing_rule_and_an_empty_report():
    ready = inject.select(inject.plan(KnowledgeResult(), 8000), 5000)
    record = inject.report(ready)
    assert ready.protected == ()
    assert ready.sections == ()
    assert (record["used"], record["dropped"], record["suppressed"]) == ([], [], [])
    assert record["protected_tokens"] == 0


def test_framing_rule_comes_with_any_shown_passage():
    ready = inject.plan(knowledge(candidate(1, "inspiration")), 8000)
    assert labels(ready.protected) == ["knowledge_rule"]
    assert ready.protected[0].text == KNOWLEDGE_RULE


def test_hidden_rule_is_added_only_when_a_narrator_only_passage_is_present():
    hidden = inject.plan(knowledge(candidate(1), candidate(2, visibility="hidden")), 8000)
    visible = inject.plan(knowledge(candidate(1), candidate(2)), 8000)
    assert HIDDEN_RULE in hidden.protected[0].text
    assert HIDDEN_RULE not in visible.protected[0].text


@pytest.mark.parametrize("budget", [1000, 2000, 4000, 8000])
def test_always_included_canon_is_capped_at_a_fifth_of_the_budget(budget):
    always = [candidate(i, words=20, always_include=True) for i in range(40)]
    ready = inject.plan(knowledge(*always), budget)
    section = next(s for s in ready.protected if s.label == "always_canon")
    assert section.tokens + SEPARATOR <= int(budget * 0.20)
    assert ready.dropped
    assert {p.reason for p in ready.dropped} == {inject.OVER_ALWAYS_CAP}
    assert len(ready.used) + len(ready.dropped) == 40


def test_always_include_is_honoured_for_canon_only():
    ready = inject.select(
        inject.plan(knowledge(candidate(1, "reference", always_include=True)), 8000), 5000
    )
    assert labels(ready.protected) == ["knowledge_rule"]
    assert labels(ready.sections) == ["knowledge_reference"]


def test_always_included_canon_is_not_spent_from_the_knowledge_budget():
    ready = inject.select(inject.plan(knowledge(candidate(1, always_include=True)), 8000), 5000)
    assert ready.spent == 0
    assert ready.protected[-1].label == "always_canon"


def test_classes_fill_in_authority_order_when_the_budget_is_short():
    result = knowledge(
        candidate(1, "inspiration", words=30),
        candidate(2, "reference", words=30),
        candidate(3, "canon", words=30),
    )
    canon_cost = count_tokens(inject.render(result.candidates[2])) + 40
    ready = inject.select(inject.plan(result, 8000), int(canon_cost / 0.33) + 1)
    assert labels(ready.sections) == ["knowledge_canon"]
    assert {p.candidate.chunk_id for p in ready.dropped} == {1, 2}
    assert {p.reason for p in ready.dropped} == {inject.OVER_KNOWLEDGE_BUDGET}


@pytest.mark.parametrize(
    ("classification", "share"), [("canon", 1.00), ("reference", 0.50), ("inspiration", 0.25)]
)
def test_each_class_is_held_to_its_share_of_the_knowledge_budget(classification, share):
    result = knowledge(*(candidate(i, classification, words=25) for i in range(40)))
    ready = inject.select(inject.plan(result, 20000), 6000)
    assert ready.budget == int(6000 * 0.33)
    assert 0 < ready.spent <= int(ready.budget * share)
    assert ready.dropped


def test_all_classes_together_stay_inside_the_knowledge_budget_and_come_out_canon_first():
    result = knowledge(
        *(candidate(f"c{i}", "canon", words=25) for i in range(15)),
        *(candidate(f"r{i}", "reference", words=25) for i in range(15)),
        *(candidate(f"i{i}", "inspiration", words=25) for i in range(15)),
    )
    ready = inject.select(inject.plan(result, 20000), 9000)
    assert ready.spent <= ready.budget
    assert ready.spent == sum(s.tokens + SEPARATOR for s in ready.sections)
    assert labels(ready.sections)[0] == "knowledge_canon"


def test_a_passage_too_large_is_skipped_and_a_smaller_lower_ranked_one_still_fits():
    result = knowledge(candidate(1, words=400), candidate(2, words=10))
    ready = inject.select(inject.plan(result, 8000), 1000)
    assert [p.candidate.chunk_id for p in ready.used] == [2]
    assert [p.candidate.chunk_id for p in ready.dropped] == [1]


def test_nothing_is_selected_when_nothing_is_available():
    ready = inject.select(inject.plan(knowledge(candidate(1)), 8000), 0)
    assert ready.sections == ()
    assert [p.reason for p in ready.dropped] == [inject.OVER_KNOWLEDGE_BUDGET]


@pytest.mark.parametrize(
    ("overrides", "label"),
    [
        ({"chunk_index": 2}, "[canon.md · Westhaven > Harbour · passage 3]"),
        ({"heading_path": ""}, "[canon.md · passage 1]"),
        ({"filename": "", "heading_path": ""}, "[Canon notes · passage 1]"),
        ({"visibility": "hidden"}, "[canon.md · Westhaven > Harbour · passage 1 [narrator only]]"),
    ],
)
def test_each_passage_carries_its_provenance_line(overrides, label):
    rendered = inject.render(candidate(1, text="The harbour is old.", **overrides))
    assert rendered == f"{label}\nThe harbour is old."


def test_report_records_used_dropped_and_suppressed_with_reasons_and_costs():
    duplicate = candidate(9, duplicate_of=1)
    result = replace(
        knowledge(candidate(1, words=10), candidate(2, words=400)),
        suppressed=(duplicate,),
        semantic_note="no embedding model",
        considered=12,
    )
    record = inject.report(inject.select(inject.plan(result, 8000), 1000))

    [used] = record["used"]
    assert used["chunk_id"] == 1
    assert used["text"] == result.candidates[0].text
    assert used["rendered"].startswith("[canon.md")
    assert used["prompt_tokens"] == count_tokens(used["rendered"])
    [dropped] = record["dropped"]
    assert dropped["reason"] == "over the knowledge budget"
    assert dropped["tokens"] == count_tokens(inject.render(result.candidates[1]))
    assert [s["duplicate_of"] for s in record["suppressed"]] == [1]
    assert record["terms"] == ["quay", "seal"]
    assert record["considered"] == 12
    assert record["semantic_note"] == "no embedding model"
    assert json.loads(json.dumps(record)) == record
