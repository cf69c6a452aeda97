"""World Info in played turns: a small SillyTavern book through the turn
service and the scripted model server, its decisions read from each
narration's snapshot and from `build_context --json`, its timers bound to
the lineage (undo, branch, retry, an edit each see their own)."""

import io
import json

import pytest
from django.core.management import call_command
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from contextbuild.placement import FRAMING
from knowledge import services as knowledge_services
from knowledge.models import KnowledgeSource, LoreEntry
from storyapp import services
from storyapp.models import ContextSnapshot
from tests.factories import hundred_entries, world_info_book
from tests.knowledge.lore import calibrate

QUIET = "The harbour is quiet tonight."


def st_entry(uid, comment, keys, content, **fields):
    return {"uid": uid, "key": keys, "comment": comment, "content": content, **fields}


BOOK = {
    "name": "Harbour",
    "entries": {
        "0": st_entry(0, "Lantern Guild", ["lantern"], "The Lantern Guild lights the quay.", order=10),
        "1": st_entry(1, "Storm", ["storm"], "Storms close the harbour mouth.", sticky=4, cooldown=4,
                      position=4, depth=1, role=0),
        "2": st_entry(2, "Omen", ["omen"], "Gulls circle before an omen.", probability=1, useProbability=True),
    },
}


@pytest.fixture
def book(campaign):
    result = knowledge_services.sources_import(
        campaign=campaign, files=[("harbour.json", json.dumps(BOOK).encode())], enqueue=False
    )
    [source] = result.created
    return knowledge_services.source_index_now(source)


@pytest.fixture
def turn(play, model):
    """Plays one turn whose narration says only QUIET (so no key comes
    from the model), returning the narration."""

    def played(text: str):
        model.script({"reply": QUIET})
        return play(text)[1]

    return played


def world_info(narration) -> dict:
    return ContextSnapshot.objects.get(action=narration).report["world_info"]


def decision(narration, title: str) -> dict:
    report = world_info(narration)
    [found] = [d for d in report["activated"] + report["skipped"] if d["entry"] == title]
    return found


def activated(narration) -> set[str]:
    return {d["entry"] for d in world_info(narration)["activated"]}


def test_an_entry_keyed_on_a_word_fires_and_reaches_the_prompt_before_the_narrators_rules(campaign, book, turn):
    narration = turn("You raise a lantern over the water.")
    guild = decision(narration, "Lantern Guild")
    assert guild["reason"] and guild["how"] == "key" and guild["position"] == "before"
    assert guild["source"] == book.title and guild["tokens"] > 0
    messages = ContextSnapshot.objects.get(action=narration).messages
    assert messages[0]["content"].startswith(FRAMING)
    assert messages[0]["content"].index("The Lantern Guild lights the quay.") < messages[0]["content"].index(
        "You are the narrator of")
    # The passage is World Info's: retrieval does not offer it a second time.
    assert "The Lantern Guild lights the quay." not in json.dumps(messages[1:])


def test_an_at_depth_entry_is_its_own_message_one_from_the_end(campaign, book, turn):
    narration = turn("A storm gathers.")
    messages = ContextSnapshot.objects.get(action=narration).messages
    assert messages[-2]["role"] == "system" and "Storms close the harbour mouth." in messages[-2]["content"]
    assert messages[-1]["role"] == "user" and messages[-1]["content"].endswith("A storm gathers.")


def test_sticky_lasts_its_actions_then_cools_down(campaign, book, turn):
    first = turn("A storm gathers.")
    storm = decision(first, "Storm")
    assert storm["how"] == "key" and storm["until"] == 5
    second = turn("You wait under the storm awning.")
    assert decision(second, "Storm")["how"] == "sticky"
    third = turn("The storm breaks.")
    cooling = decision(third, "Storm")
    assert cooling["how"] == "cooldown" and cooling["until"] == 9
    fourth = turn("Another storm?")
    assert decision(fourth, "Storm")["how"] == "cooldown"
    fifth = turn("The storm returns.")
    assert decision(fifth, "Storm")["how"] == "key"


def test_undo_then_a_new_turn_sees_the_older_timers(campaign, book, turn):
    turn("A storm gathers.")
    turn("You wait.")
    cooled = turn("The storm breaks.")
    assert decision(cooled, "Storm")["how"] == "cooldown"
    services.turn_undo(campaign=campaign, now=timezone.now())
    campaign.refresh_from_db()
    again = turn("The storm breaks again.")
    # Back on the second turn's lineage the storm is still sticky there, so
    # it ends now and cools down as it did: the timers of that lineage.
    assert decision(again, "Storm")["how"] == "cooldown"
    for _ in range(2):
        services.turn_undo(campaign=campaign, now=timezone.now())
    campaign.refresh_from_db()
    assert decision(turn("You wait for a storm."), "Storm")["how"] == "sticky"
    for _ in range(2):
        services.turn_undo(campaign=campaign, now=timezone.now())
    campaign.refresh_from_db()
    assert campaign.head is None
    assert decision(turn("You wait for a storm."), "Storm")["how"] == "key"


def test_a_branch_from_an_earlier_action_sees_that_lineages_timers(campaign, book, turn):
    first = turn("A storm gathers.")
    turn("You wait.")
    turn("You wait longer.")
    services.branch_jump(campaign=campaign, action=first, now=timezone.now())
    campaign.refresh_from_db()
    branched = turn("Rain, no storm.")
    assert decision(branched, "Storm")["how"] == "sticky"
    assert branched.parent.parent_id == first.pk


def test_retry_rolls_a_new_seed(campaign, book, turn, model, django_capture_on_commit_callbacks):
    first = turn("An omen in the sky.")
    rolls = {decision(first, "Omen")["reason"]}
    for _ in range(3):
        model.script({"reply": QUIET})
        with django_capture_on_commit_callbacks(execute=True):
            retried = services.turn_retry(campaign=campaign, now=timezone.now())
        campaign.refresh_from_db()
        assert retried.parent_id == first.parent_id
        rolls.add(decision(retried, "Omen")["reason"])
    assert all("roll" in reason for reason in rolls) and len(rolls) > 1


def test_retry_of_a_sticky_turn_reads_the_parents_timers(campaign, book, turn, model, django_capture_on_commit_callbacks):
    turn("A storm gathers.")
    second = turn("You wait.")
    assert decision(second, "Storm")["how"] == "sticky"
    model.script({"reply": QUIET})
    with django_capture_on_commit_callbacks(execute=True):
        retried = services.turn_retry(campaign=campaign, now=timezone.now())
    assert decision(retried, "Storm")["how"] == "sticky"


def test_editing_an_action_keeps_its_lineages_timers(campaign, book, turn):
    first = turn("A storm gathers.")
    services.action_edit(campaign=campaign, action=first.parent, text="A squall gathers.")
    campaign.refresh_from_db()
    assert decision(turn("You wait."), "Storm")["how"] == "sticky"


def test_editing_an_entry_resets_its_timers(campaign, book, turn):
    turn("A storm gathers.")
    entry = LoreEntry.objects.get(source=book, title="Storm")
    LoreEntry.objects.filter(pk=entry.pk).update(text="Storms close the harbour mouth for days.")
    # The entry editor's service bumps the revision with every change.
    KnowledgeSource.objects.filter(pk=book.pk).update(revision=F("revision") + 1)
    after = turn("You wait.")
    assert decision(after, "Storm")["how"] == "no_key"


def test_build_context_json_carries_world_info(campaign, book, turn):
    turn("A storm gathers.")
    out = io.StringIO()
    call_command("build_context", campaign=campaign.pk, json=True, player_text="A lantern swings.", stdout=out)
    report = json.loads(out.getvalue())["world_info"]
    assert set(report) >= {"activated", "skipped", "budget", "used", "notes"}
    by_title = {d["entry"]: d for d in report["activated"] + report["skipped"]}
    assert by_title["Lantern Guild"]["how"] == "key" and by_title["Storm"]["how"] == "sticky"
    assert {"entry", "source", "reason", "position", "tokens"} <= set(by_title["Storm"])
    assert by_title["Storm"]["until"] == 5


def test_the_inspector_shows_activated_entries_and_groups_the_skipped_with_the_budget_line(
    client, campaign, turn
):
    result = knowledge_services.sources_import(
        campaign=campaign, files=[("harbour.json", world_info_book(*hundred_entries()))], enqueue=False
    )
    knowledge_services.source_index_now(result.created[0])
    narration = turn("A storm over the harbour; you lift a lantern.")
    client.force_login(campaign.owner)
    page = client.get(reverse("context_inspector", args=[campaign.pk, narration.pk])).content.decode()
    assert "<h3 id=\"world-info-" in page
    assert "100 entries considered, 3 activated, using" in page
    assert "at depth 1 as a system message" in page and "after the narrator&#x27;s rules" in page
    assert "World Info: at depth 1 (system message)" in page
    assert "No key found (97)" in page
    assert "the always-include cap applies to prose Canon only" in page


def test_a_vectorized_entry_the_semantic_path_admits_is_activated_by_meaning(campaign, endpoint, model, turn):
    calibrate(endpoint)
    harbour = {
        "comment": "The harbour", "key": ["zzyzx"], "vectorized": True,
        "content": "Westhaven harbour shelters the salt fleet behind a granite breakwater. Smugglers bribe the "
                   "lantern wardens at the sea gate, and the quay is watched day and night. Merchants haggle over "
                   "salt and rope on the quay while the harbour wardens count the ships that come in past the "
                   "breakwater with the evening tide.",
    }
    result = knowledge_services.sources_import(
        campaign=campaign, files=[("harbour.json", world_info_book(harbour))], enqueue=False
    )
    knowledge_services.source_index_now(result.created[0])
    narration = turn("Mara haggles with the smugglers on the quay of Westhaven harbour.")
    assert decision(narration, "The harbour")["how"] == "meaning"


def test_the_inspectors_changes_name_the_entries_that_entered_and_left(campaign, book, turn):
    from storyapp import inspector

    first = turn("You raise a lantern.")
    # Scan depth 2: this action and the last narration; the lantern is three messages back.
    second = turn("A storm gathers.")
    changes = inspector.diff(ContextSnapshot.objects.get(action=second).report,
                             ContextSnapshot.objects.get(action=first).report)
    assert changes["lorebook"] == {"entered": ["Storm"], "left": ["Lantern Guild"]}


def preview(campaign) -> dict:
    out = io.StringIO()
    call_command("build_context", campaign=campaign.pk, json=True, stdout=out)
    report = json.loads(out.getvalue())["world_info"]
    return {d["entry"]: d for d in report["activated"] + report["skipped"]}


def test_undo_and_redo_each_read_the_timers_of_where_the_head_is(campaign, book, turn):
    turn("A storm gathers.")
    turn("You wait.")
    turn("The storm breaks.")
    at_head = preview(campaign)["Storm"]
    assert at_head["how"] == "cooldown"
    services.turn_undo(campaign=campaign, now=timezone.now())
    # Back at the second narration, whose prompt kept the storm sticky until action 5.
    assert preview(campaign)["Storm"]["how"] == "sticky"
    services.turn_redo(campaign=campaign, now=timezone.now())
    assert preview(campaign)["Storm"] == at_head


def test_build_context_text_says_what_world_info_took(campaign, book, turn):
    turn("A storm gathers.")
    out = io.StringIO()
    call_command("build_context", campaign=campaign.pk, stdout=out)
    assert "World Info: 1 of 3 entries activated" in out.getvalue()
