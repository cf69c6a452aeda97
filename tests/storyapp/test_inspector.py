"""The context inspector shows what the narrator was given, from the snapshot alone."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from storyapp import derivedjobs, inspector, services
from storyapp.models import ContextSnapshot, DerivedJob
from tests.factories import CampaignFactory, story

ORDER = [
    "narrator", "state_rule", "campaign_canon", "ai_instructions", "persona", "plot_essentials",
    "length_hint", "state_reminder", "player_action", "narration", "authors_note", "narrative_state",
    "player_input",
]


@pytest.fixture
def campaign(alice, endpoint):
    return CampaignFactory(
        owner=alice, endpoint=endpoint, ai_instructions="Second person.", authors_note="Grim.",
        canon={"rules": ["Magic costs blood."], "forbidden_status_changes": []},
        initial_state={"scene": {"summary": "Mara waits.", "location": "Westhaven harbour"}},
    )


@pytest.fixture
def turn(campaign, model, django_capture_on_commit_callbacks):
    def play(text: str):
        with django_capture_on_commit_callbacks(execute=True):
            _, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
        narration.refresh_from_db()
        return narration

    return play


def test_every_narration_stores_the_exact_text_it_was_sent(campaign, turn, model):
    narration = turn("I walk to the quay.")
    [sent] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    snapshot = narration.snapshot
    assert sent["messages"] == snapshot.messages == snapshot.report["prompt"]["messages"]
    assert sent["messages"][0] == {"role": "system", "content": snapshot.system_text}
    assert sent["messages"][-1]["role"] == "user"
    assert sent["messages"][-1]["content"].endswith("I walk to the quay.")


def test_the_inspector_shows_each_section_and_the_budget(client, campaign, turn):
    narration = turn("I walk to the quay.")
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    for label in ("narrator", "plot_essentials", "narrative_state", "state_reminder"):
        assert f"<code>{label}</code>" in page
    assert "Reserved for the reply" in page and "Plot essentials" in page and "Magic costs blood." in page and "I walk to the quay." in page


def test_the_inspector_does_not_change_when_the_campaign_does(client, campaign, turn):
    narration = turn("I walk to the quay.")
    campaign.plot_essentials = "Something else entirely."
    campaign.save()
    client.force_login(campaign.owner)
    page = client.get(
        reverse("context_inspector", args=[campaign.pk, narration.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Mara carries the broken seal." in page and "Something else entirely." not in page
    assert "<html" not in page


def test_the_inspector_lists_what_changed_since_the_previous_narration(client, campaign, turn):
    turn("I walk to the quay.")
    campaign.refresh_from_db()
    campaign.plot_essentials = ""
    campaign.save()
    second = turn("I wait.")
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, second.pk])).content.decode()
    assert "− Plot essentials" in page


def test_budget_bars_add_up_to_the_budget():
    report = {
        "sections": [{"label": "narrator", "tokens": 100}, {"label": "history", "tokens": 300}],
        "tokens": {"budget": 1000, "total": 400, "output_reserve": 200},
    }
    bars = inspector.budget_bars(report)
    assert [b.label for b in bars] == ["Narrator rules", "Story so far", "Reserved for the reply", "Unused"]
    assert sum(b.tokens for b in bars) == 1000


def test_build_context_prints_the_next_turns_report_without_storing_anything(campaign, model):
    story(campaign, "I walk to the quay.", "Gulls wheel over the tide.")
    out = StringIO()
    call_command("build_context", campaign=campaign.pk, player_text="I hail Aldric.", json=True, stdout=out)
    report = json.loads(out.getvalue())
    labels = [s["label"] for s in report["sections"]]
    assert list(dict.fromkeys(label for label in labels if label in ORDER)) == [label for label in ORDER if label in labels]
    assert "I hail Aldric." in report["prompt"]["story"]
    assert not ContextSnapshot.objects.exists() and not model.requests()


def test_build_context_budget_override_and_overflow(campaign):
    out = StringIO()
    call_command("build_context", campaign=campaign.pk, budget=5000, json=True, stdout=out)
    assert json.loads(out.getvalue())["tokens"]["budget"] == 5000
    with pytest.raises(CommandError, match="300"):
        call_command("build_context", campaign=campaign.pk, budget=300, json=True, stdout=StringIO())


@pytest.mark.parametrize("report", [
    {},
    {"sections": "nope", "tokens": {"budget": "x"}, "knowledge": {"used": [1, {"chunk_index": "a"}]}},
    {"sections": [{"label": None, "tokens": "9"}, 3], "knowledge": [], "window": "verified", "memories": {"used": 4}},
    ["not", "a", "report"],
])
def test_a_malformed_imported_report_renders_what_it_can(client, campaign, turn, report):
    narration = turn("I walk to the quay.")
    ContextSnapshot.objects.filter(action=narration).update(report=report)
    client.force_login(campaign.owner)
    response = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk]))
    assert response.status_code == 200
    assert "I walk to the quay." in response.content.decode()


def test_the_inspector_lists_rejected_passages_with_their_reasons_and_counts_that_add_up(client, campaign, turn):
    narration = turn("I walk to the quay.")
    report = narration.snapshot.report
    report["knowledge"].update(generated=3, rejected=2, considered=1, rejections=[
        {"title": "Tides", "filename": "tides.md", "passage": 2, "heading_path": "Tides", "classification": "reference",
         "visibility": "visible", "matched_terms": ["quay"], "lexical": 0.4, "cosine": None,
         "why": "lexical: one meaningful term, not a rare one"},
        {"title": "Secret", "filename": "secret.md", "passage": 1, "heading_path": "The traitor", "classification": "canon",
         "visibility": "hidden", "matched_terms": [], "lexical": None, "cosine": 0.1, "why": "semantic: cosine below"},
    ])
    ContextSnapshot.objects.filter(action=narration).update(report=report)
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "found 3 passages: 1 admitted, 2 rejected" in page
    assert "tides.md · Tides · passage 2" in page and "one meaningful term, not a rare one" in page
    hidden = page[page.index("secret.md") - 200:page.index("secret.md")]
    assert '<details class="spoiler">' in hidden and "reveal" in hidden


def test_the_inspector_shows_each_message_as_sent_with_its_speaker(client, campaign, turn):
    turn("I walk to the quay.")
    narration = turn("I hail the ferryman.")
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "Messages, exactly as sent" in page
    speakers = [m["role"] for m in narration.snapshot.messages]
    assert speakers[:3] == ["system", "user", "assistant"] and speakers[-1] == "user"
    assert page.count("<pre tabindex=\"0\" aria-label=\"Message ") == len(speakers)
    assert "1. System" in page and "2. Reader" in page and "3. Narrator" in page
    assert "{'role'" not in page and '<ul class="messages">' not in page  # not the flash-message list


def test_consecutive_turns_keep_the_same_prefix(campaign, turn):
    first = turn("I walk to the quay.")
    second = turn("I hail the ferryman.")
    before, after = first.snapshot.messages, second.snapshot.messages
    assert after[: len(before) - 1] == before[:-1]
    assert after[len(before) - 1]["content"].endswith("I walk to the quay.")


def test_a_longer_history_is_not_reported_as_a_section_that_changed(campaign, turn):
    turn("I walk to the quay.")
    second = turn("I hail the ferryman.")
    third = turn("I wait.")
    changes = inspector.diff(third.snapshot.report, second.snapshot.report)
    assert changes["sections"] == {"entered": [], "left": []}


LONG_MEMORY = {
    "summary": {
        "text": "Mara reached the quay and met Aldric.\n\nAldric died at the quay.",
        "covers_through": 41, "covers_actions": 12,
        "parts": [
            {"id": 7, "level": 1, "starts_after": None, "covers_through": 30, "through_depth": 7, "tokens": 40},
            {"id": 9, "level": 0, "starts_after": 30, "covers_through": 41, "through_depth": 11, "tokens": 22},
        ],
    },
    "memories": {"used": [
        {"text": "Aldric: dead.", "authority": "recorded", "score": 0.91, "source_action": 33, "id": 5,
         "admitted_by": "lexical"},
        {"text": "Aldric feared the tide.", "authority": "inferred", "score": 0.4, "source_action": 41, "id": 6,
         "admitted_by": "semantic"},
    ]},
    "state": {
        "scene": {"summary": "Mara kneels by the body.", "location": "Westhaven quay"},
        "entities": {"aldric": {"name": "Aldric", "status": "dead", "location": "the quay", "items": ["a brass key"]},
                     "bad id!": "not an object"},
        "threads": {"seal": {"title": "Return the broken seal", "status": "open"},
                    "debt": {"title": "Pay the ferryman", "status": "resolved"}},
        "inventory": ["the broken seal"],
    },
    "state_events": {
        "applied": [{"type": "entity", "id": "aldric", "status": "dead"}],
        "refused": ["entity “ghost”: no such entity"], "note": "",
        "clamped": ["scene event 2: summary cut to 300 characters"],
    },
    "derived": [{"kind": "summary", "state": "failed", "attempts": 3, "error": "HTTP 500 from the model", "anchor": 41}],
}


def test_the_inspector_shows_the_long_memory_and_the_state_sent(client, campaign, turn):
    narration = turn("I walk to the quay.")
    ContextSnapshot.objects.filter(action=narration).update(report={**narration.snapshot.report, **LONG_MEMORY})
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "covers 12 actions, through action #41, in 2 parts" in page
    assert "Level 1 (a summary of summaries) · actions 1–8 of the story" in page
    assert "Level 0 · actions 9–12 of the story" in page and "Aldric died at the quay." in page
    assert "[inferred]</em> Aldric feared the tide." in page and "0.91" in page and "#33" in page
    assert "Westhaven quay" in page and "holds a brass key" in page and "Return the broken seal" in page
    assert "Pay the ferryman" in page and "the broken seal" in page
    assert "✓ entity aldric: status dead" in page and "refused: entity “ghost”: no such entity" in page
    assert "applied in part: scene event 2: summary cut to 300 characters" in page
    assert "failed after 3 attempts" in page and "HTTP 500 from the model" in page


def test_an_old_snapshot_without_long_memory_renders_without_it(client, campaign, turn):
    narration = turn("I walk to the quay.")
    old = {k: v for k, v in narration.snapshot.report.items() if k not in ("summary", "memories", "state", "derived")}
    ContextSnapshot.objects.filter(action=narration).update(report=old)
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "<th>Summary</th>" not in page and "Narrative state sent" not in page and "I walk to the quay." in page


@pytest.mark.parametrize("part", [
    {"summary": {"text": "Only text."}},
    {"summary": {"text": "One.\n\nTwo.\n\nThree.", "parts": [{"level": "x"}]}, "memories": {"used": [{"score": "high"}]}},
    {"state": {"scene": "a string", "entities": [1, 2], "threads": {"t": 4}}, "derived": [{"kind": None}, "no"]},
])
def test_malformed_long_memory_parts_render_what_they_can(client, campaign, turn, part):
    narration = turn("I walk to the quay.")
    ContextSnapshot.objects.filter(action=narration).update(report={**narration.snapshot.report, **part})
    client.force_login(campaign.owner)
    assert client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).status_code == 200


def test_build_context_json_carries_the_long_memory_and_the_last_turns_state_events(campaign, turn, model):
    block = {"events": [{"type": "scene", "location": "the ferry"}, {"type": "entity", "id": "ghost", "status": "gone"}]}
    model.script({"reply": f"You step aboard.\n<state>{json.dumps(block)}</state>"})
    narration = turn("I board the ferry.")
    out = StringIO()
    call_command("build_context", campaign=campaign.pk, json=True, stdout=out)
    report = json.loads(out.getvalue())
    assert {"summary", "memories", "state", "state_events", "sections", "tokens", "prompt"} <= set(report)
    assert report["state_events"] == narration.snapshot.report["state_events"]
    assert report["state_events"]["applied"] and report["state_events"]["refused"]
    assert report["state"]["scene"]["location"] == "the ferry"
    assert report["summary"] is None and report["memories"] == {"used": [], "dropped": []}


def test_build_context_json_has_no_state_events_before_the_first_narration(campaign):
    out = StringIO()
    call_command("build_context", campaign=campaign.pk, json=True, stdout=out)
    assert json.loads(out.getvalue())["state_events"] is None


def test_the_state_sent_lists_only_the_entities_the_prompt_showed(client, campaign, turn):
    from contextbuild.rules import PROMPT_ENTITIES

    narration = turn("I walk to the quay.")
    cast = {f"p{n}": {"name": f"Person {n}"} for n in range(PROMPT_ENTITIES + 2)}
    ContextSnapshot.objects.filter(action=narration).update(
        report={**narration.snapshot.report, "state": {"entities": cast}})
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "Kept in the state but not sent" in page and "Person 0, Person 1." in page
    assert f"<strong>Person {PROMPT_ENTITIES + 1}</strong>" in page and "<strong>Person 0</strong>" not in page


# ------------------------------------------------- lines that say which case they are


def _failed(error="“Local” failed with an error (500).", state="failed", attempts=3):
    return {"kind": "summary", "state": state, "attempts": attempts, "error": error, "anchor": 41}


TWO_PARTS = {"text": "One.\n\nTwo.", "covers_through": 41, "covers_actions": 12,
             "parts": [{"level": 1, "through_depth": 7}, {"level": 0, "through_depth": 11}]}


@pytest.mark.parametrize(("summary", "history", "derived", "line"), [
    (None, {"included": 5, "total": 5}, [], "none needed: the whole story fit the window (5 of 5 actions sent)."),
    (None, {"included": 2, "total": 29}, [_failed()],
     "none: 27 of 29 actions did not fit the window; their summary failed after 3 attempts: "
     "“Local” failed with an error (500)."),
    (None, {"included": 2, "total": 29}, [_failed(state="queued", attempts=1)],
     "none: 27 of 29 actions did not fit the window; their summary was waiting for a worker when this prompt "
     "was built (its last attempt failed: “Local” failed with an error (500))."),
    (None, {"included": 2, "total": 29}, [_failed(state="running", error="")],
     "none: 27 of 29 actions did not fit the window; their summary was being written when this prompt was built."),
    (None, {"included": 2, "total": 29}, [{"kind": "memories", "state": "failed", "attempts": 3, "error": "x"}],
     "none: 27 of 29 actions did not fit the window; no summary of them was written yet (one is asked for once "
     "enough of the story has fallen out of the window)."),
    (TWO_PARTS, {"included": 3, "total": 15}, [], "covers 12 actions, through action #41, in 2 parts."),
    (TWO_PARTS, {"included": 2, "total": 29}, [_failed(error="The model returned an empty summary", attempts=1)],
     "covers 12 actions, through action #41, in 2 parts; 15 dropped actions after it are not in it; "
     "their summary failed after 1 attempt: The model returned an empty summary."),
])
def test_the_summary_line_says_which_case_it_is(summary, history, derived, line):
    assert inspector.readable({"summary": summary, "history": history, "derived": derived})["summary_line"] == line


def test_the_inspector_page_shows_why_there_is_no_summary(client, campaign, turn):
    narration = turn("I walk to the quay.")
    ContextSnapshot.objects.filter(action=narration).update(report={
        **narration.snapshot.report, "summary": None, "history": {"included": 2, "total": 29},
        "derived": [_failed()],
    })
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert ("none: 27 of 29 actions did not fit the window; their summary failed after 3 attempts: "
            "“Local” failed with an error (500).") in page
    assert "or no summary was written yet" not in page


@pytest.mark.parametrize(("counted", "shown"), [
    ({"server_count_source": "usage", "server_compared_to": 888},
     ["921 as the server counted them (its reply's usage)",
      "This turn's ratio: 1.037 server tokens per one of ours (921 / 888)."]),
    ({"server_count_source": "tokenizer", "server_compared_to": 856},
     ["the server's tokenizer counted the prompt's text alone as 921, which we count as 856",
      "This turn's ratio: 1.076 server tokens per one of ours (921 / 856)."]),
])
def test_the_ratio_shown_is_of_the_two_counts_beside_it_and_the_learned_one_is_labelled(
    client, campaign, turn, counted, shown
):
    narration = turn("I walk to the quay.")
    tokens = {**narration.snapshot.report["tokens"], "total": 888, "server_prompt_tokens": 921,
              "ratio": round(921 / counted["server_compared_to"], 4), "ratio_on_profile": 1.06,
              "ratio_learned": 1.0521, "ratio_budgeted": 1.09, **counted}
    ContextSnapshot.objects.filter(action=narration).update(report={**narration.snapshot.report, "tokens": tokens})
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    for line in shown:
        assert line in page
    assert ("Learned ratio for this endpoint: 1.060 before this turn, 1.052 after it; this prompt was budgeted "
            "at 1.090 (the learned ratio, at least 1, plus a safety margin).") in page
    assert "(ratio " not in page


def test_a_turns_report_keeps_the_counts_its_ratio_is_of(campaign, turn):
    tokens = turn("I walk to the quay.").snapshot.report["tokens"]
    assert tokens["server_count_source"] == "usage" and tokens["server_compared_to"] == tokens["total"]
    assert tokens["ratio"] == round(tokens["server_prompt_tokens"] / tokens["total"], 4)
    campaign.endpoint.refresh_from_db()
    assert tokens["ratio_learned"] == campaign.endpoint.token_ratio


def test_failing_memories_do_not_crowd_the_summary_out_of_the_report(campaign):
    actions = story(campaign, *[f"Turn {n}." for n in range(8)])
    summary = DerivedJob.objects.create(campaign=campaign, kind=DerivedJob.Kind.SUMMARY, anchor=actions[1],
                                        key="summary:test", state=DerivedJob.State.FAILED, error="down")
    for n, action in enumerate(actions[2:]):
        DerivedJob.objects.create(campaign=campaign, kind=DerivedJob.Kind.MEMORIES, anchor=action,
                                  key=f"memories:test:{n}", state=DerivedJob.State.FAILED, error="down")
    found = derivedjobs.notices(campaign.pk, {a.pk for a in actions})
    assert summary.anchor_id in [n.anchor for n in found if n.kind == "summary"]
    assert sum(1 for n in found if n.kind == "memories") == derivedjobs.NOTICED_JOBS
