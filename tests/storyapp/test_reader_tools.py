"""What readers of other tools expect beside the story: memory notes edited
in place, a branch view, exports, bundles from the campaign list, deleting
the last action, an opening scene, and their own reply settings."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from storyapp import lineage, services
from storyapp.forms import CampaignForm
from storyapp.models import Action, Campaign
from tests.factories import CampaignFactory

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def campaign(alice, endpoint):
    return CampaignFactory(owner=alice, endpoint=endpoint, title="The Drowned Lantern", persona_name="Ysolde")


@pytest.fixture
def reader(client, alice):
    client.force_login(alice)
    return client


def _chat_prompt(model) -> str:
    [chat] = [r for r in model.requests() if r["path"].endswith("/chat/completions")][-1:]
    return "\n".join(m["content"] for m in chat["messages"])


def test_memory_notes_saved_beside_the_story_reach_the_next_turn(reader, campaign, play, model):
    response = reader.post(reverse("campaign_memory", args=[campaign.pk]), {
        "authors_note": "Keep it quiet and cold.", "plot_essentials": "The lantern is cursed.",
        "ai_instructions": "Second person.",
    }, **HX)
    assert response.status_code == 200 and "Saved. The next turn reads them." in response.content.decode()
    model.reset()
    play("I light the lantern.")
    prompt = _chat_prompt(model)
    assert "Keep it quiet and cold." in prompt and "The lantern is cursed." in prompt


def test_the_branch_view_lists_every_branch_end_and_jumps_to_one(reader, campaign, play, model):
    model.script({"reply": "First told."}, {"reply": "Abandoned told."}, {"reply": "New told."})
    play("First move.")
    _, abandoned = play("A move I will undo.")
    services.turn_undo(campaign=campaign, now=timezone.now())
    play("A different move.")
    page = reader.get(reverse("campaign_branches", args=[campaign.pk])).content.decode()
    assert "Abandoned told." in page and "New told." in page and "the story you are reading" in page
    response = reader.post(reverse("branch_jump", args=[campaign.pk, abandoned.pk]))
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert campaign.head_id == abandoned.pk
    assert Action.objects.filter(campaign=campaign).count() == 6


def test_the_story_exports_as_markdown_and_as_a_page_with_or_without_the_reader(reader, campaign, play, model):
    model.script({"reply": "The bell tolls.\n\nThe tide turns."})
    play("I ring the bell.")
    markdown = reader.get(reverse("story_export_markdown", args=[campaign.pk])).content.decode()
    assert markdown.startswith("# The Drowned Lantern\n")
    assert "> **Ysolde:**\n> I ring the bell." in markdown and "The bell tolls.\n\nThe tide turns." in markdown
    bare = reader.get(reverse("story_export_markdown", args=[campaign.pk]) + "?reader=0").content.decode()
    assert "I ring the bell." not in bare and "The tide turns." in bare
    page = reader.get(reverse("story_export_html", args=[campaign.pk])).content.decode()
    assert "<h1>The Drowned Lantern</h1>" in page and "I ring the bell." in page and "@media print" in page


def test_a_bundle_exported_from_the_page_imports_from_the_campaign_list(reader, campaign, play, model):
    play("I ring the bell.")
    exported = reader.get(reverse("campaign_export_bundle", args=[campaign.pk]))
    assert exported["Content-Disposition"] == 'attachment; filename="the-drowned-lantern.loremaster.json"'
    upload = SimpleUploadedFile("lantern.json", exported.content, content_type="application/json")
    response = reader.post(reverse("campaign_import"), {"bundle": upload})
    copy = Campaign.objects.exclude(pk=campaign.pk).get()
    assert response.status_code == 302 and response["Location"] == reverse("campaign_play", args=[copy.pk])
    assert [a.text for a in lineage.tail(copy.pk, copy.head_id, 10)][0] == "I ring the bell."


def test_a_bad_bundle_is_refused_clearly_and_imports_nothing(reader, campaign):
    for content, message in ((b"\xff not json", "is not a JSON document"),
                             (json.dumps({"format": "something else"}).encode(), "Nothing was imported")):
        upload = SimpleUploadedFile("bad.json", content, content_type="application/json")
        page = reader.post(reverse("campaign_import"), {"bundle": upload}, follow=True).content.decode()
        assert message in page
    assert Campaign.objects.count() == 1


def test_another_reader_cannot_export_or_change_a_campaign(client, bob, campaign, play, model):
    _, narration = play("A secret move.")
    client.force_login(bob)
    for name in ("story_export_markdown", "story_export_html", "campaign_export_bundle", "campaign_branches"):
        assert client.get(reverse(name, args=[campaign.pk])).status_code == 404, name
    assert client.post(reverse("campaign_memory", args=[campaign.pk]), {"authors_note": "x"}).status_code == 404
    assert client.post(reverse("branch_jump", args=[campaign.pk, narration.pk])).status_code == 404
    assert client.post(reverse("action_delete", args=[campaign.pk, narration.pk])).status_code == 404
    campaign.refresh_from_db()
    assert campaign.authors_note != "x" and Action.objects.filter(pk=narration.pk).exists()


def test_the_last_action_can_be_deleted_and_the_head_steps_back(reader, campaign, play, model):
    player, narration = play("I open the door.")
    assert reader.post(reverse("action_delete", args=[campaign.pk, narration.pk]), **HX).status_code == 200
    campaign.refresh_from_db()
    assert campaign.head_id == player.pk and not Action.objects.filter(pk=narration.pk).exists()
    elsewhere = Action.objects.create(campaign=campaign, kind="ai", text="Not the head.")
    with pytest.raises(services.TurnRefused, match="last action"):
        services.action_delete(campaign=campaign, action=elsewhere, now=timezone.now())


def test_an_action_with_a_branch_under_it_is_not_deleted(campaign, play, model):
    play("One.")
    services.turn_undo(campaign=campaign, now=timezone.now())
    campaign.refresh_from_db()
    assert campaign.head_id is None
    play("Two.")
    services.turn_undo(campaign=campaign, now=timezone.now())
    services.turn_redo(campaign=campaign, now=timezone.now())
    campaign.refresh_from_db()
    head = Action.objects.get(pk=campaign.head_id)
    Action.objects.create(campaign=campaign, parent=head, depth=head.depth + 1, kind="player", text="Undone later.")
    with pytest.raises(services.TurnRefused, match="branch"):
        services.action_delete(campaign=campaign, action=head, now=timezone.now())


def test_an_opening_scene_becomes_the_first_narration(reader, endpoint):
    response = reader.post(reverse("campaign_create"), {
        "title": "Opened", "opening_text": "Fog sits on the harbour like a held breath.", "endpoint": endpoint.pk,
    })
    campaign = Campaign.objects.get(title="Opened")
    assert response.status_code == 302
    [opening] = lineage.tail(campaign.pk, campaign.head_id, 5)
    assert (opening.kind, opening.text) == ("ai", "Fog sits on the harbour like a held breath.")


def test_the_readers_reply_settings_are_sent_and_capped_by_the_profile(campaign, play, model, endpoint):
    endpoint.max_output_tokens = 400
    endpoint.save()
    form = CampaignForm({"title": "x", "temperature": "0.3", "max_output_tokens": "900", "endpoint": endpoint.pk})
    assert not form.is_valid() and "at most 400 tokens" in str(form.errors["max_output_tokens"])
    assert not CampaignForm({"title": "x", "temperature": "3"}).is_valid()
    campaign.temperature, campaign.max_output_tokens = 0.3, 250
    campaign.save()
    model.reset()
    play("I whisper.")
    [chat] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    assert chat["max_tokens"] == 250


def test_the_campaign_form_reads_like_a_story_setup(reader, campaign):
    page = reader.get(reverse("campaign_edit", args=[campaign.pk])).content.decode()
    for legend in ("Story and opening scene", "Your character", "Narrator", "Canon", "Model"):
        assert f"<legend>{legend}</legend>" in page
    assert 'id="id_temperature_helptext"' in page


