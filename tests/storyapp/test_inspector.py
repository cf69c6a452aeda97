"""The context inspector shows what the narrator was given, from the snapshot alone."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from storyapp import inspector, services
from storyapp.models import ContextSnapshot
from tests.factories import PASSWORD, CampaignFactory, story

ORDER = [
    "narrator", "state_rule", "campaign_canon", "ai_instructions", "persona", "plot_essentials",
    "history", "authors_note", "recent_history", "narrative_state", "length_hint", "state_reminder",
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
    assert sent["messages"] == [
        {"role": "system", "content": snapshot.system_text},
        {"role": "user", "content": snapshot.story_text},
    ]
    assert snapshot.report["prompt"] == {"system": snapshot.system_text, "story": snapshot.story_text}


def test_the_inspector_shows_each_section_and_the_budget(client, campaign, turn):
    narration = turn("I walk to the quay.")
    client.login(username="alice", password=PASSWORD)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    for label in ("narrator", "plot_essentials", "narrative_state", "state_reminder"):
        assert f"<code>{label}</code>" in page
    assert "reply reserve" in page and "Magic costs blood." in page and "I walk to the quay." in page


def test_the_inspector_does_not_change_when_the_campaign_does(client, campaign, turn):
    narration = turn("I walk to the quay.")
    campaign.plot_essentials = "Something else entirely."
    campaign.save()
    client.login(username="alice", password=PASSWORD)
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
    client.login(username="alice", password=PASSWORD)
    page = client.get(reverse("context_inspector", args=[campaign.pk, second.pk])).content.decode()
    assert "− plot_essentials" in page


def test_budget_bars_add_up_to_the_budget():
    report = {
        "sections": [{"label": "narrator", "tokens": 100}, {"label": "history", "tokens": 300}],
        "tokens": {"budget": 1000, "total": 400, "output_reserve": 200},
    }
    bars = inspector.budget_bars(report)
    assert [b.label for b in bars] == ["narrator", "history", "reply reserve", "unused"]
    assert sum(b.tokens for b in bars) == 1000


def test_build_context_prints_the_next_turns_report_without_storing_anything(campaign, model):
    story(campaign, "I walk to the quay.", "Gulls wheel over the tide.")
    out = StringIO()
    call_command("build_context", campaign=campaign.pk, player_text="I hail Aldric.", json=True, stdout=out)
    report = json.loads(out.getvalue())
    labels = [s["label"] for s in report["sections"]]
    assert [label for label in labels if label in ORDER] == [label for label in ORDER if label in labels]
    assert "I hail Aldric." in report["prompt"]["story"]
    assert not ContextSnapshot.objects.exists() and not model.requests()


def test_build_context_budget_override_and_overflow(campaign):
    out = StringIO()
    call_command("build_context", campaign=campaign.pk, budget=5000, json=True, stdout=out)
    assert json.loads(out.getvalue())["tokens"]["budget"] == 5000
    with pytest.raises(CommandError, match="300"):
        call_command("build_context", campaign=campaign.pk, budget=300, json=True, stdout=StringIO())
