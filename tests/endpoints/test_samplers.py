"""Samplers per profile and per campaign, sent only where the server reads
them, under its own names; a field the server refuses is dropped once and
remembered, without failing the turn (issue 26, item 4)."""

import pytest
from django.urls import reverse
from django.utils import timezone

from endpoints import samplers
from storyapp import services
from tests.factories import CampaignFactory, EndpointProfileFactory

LOCAL = {"min_p": 0.05, "repetition_penalty": 1.1, "dry_multiplier": 0.8, "top_p": 0.9, "banned_strings": ["Suddenly"]}


@pytest.fixture
def turn(django_capture_on_commit_callbacks):
    def play(campaign, text="I walk to the quay."):
        with django_capture_on_commit_callbacks(execute=True):
            _, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
        narration.refresh_from_db()
        return narration

    return play


def _chats(model):
    return [r for r in model.requests() if r["path"] == "/v1/chat/completions"]


def test_a_llama_cpp_server_gets_its_own_names_and_the_snapshot_records_them(alice, model, turn):
    profile = EndpointProfileFactory(base_url=model.base_url, samplers=LOCAL)
    narration = turn(CampaignFactory(owner=alice, endpoint=profile))
    [sent] = _chats(model)
    assert sent["extra"] == {"min_p": 0.05, "repeat_penalty": 1.1, "dry_multiplier": 0.8, "top_p": 0.9}
    record = narration.snapshot.report["samplers"]
    assert record["backend"] == "llama.cpp" and record["ignored"] == ["banned_strings"]
    assert record["sent"]["repeat_penalty"] == 1.1


def test_a_campaigns_override_wins_over_the_profile(alice, model, turn):
    profile = EndpointProfileFactory(base_url=model.base_url, samplers=LOCAL)
    turn(CampaignFactory(owner=alice, endpoint=profile, sampler_overrides={"min_p": 0.2, "seed": 7}))
    [sent] = _chats(model)
    assert sent["extra"]["min_p"] == 0.2 and sent["extra"]["seed"] == 7


def test_a_backend_that_lacks_a_sampler_is_not_sent_it(alice, model, turn):
    profile = EndpointProfileFactory(base_url=model.base_url, samplers=LOCAL, backend="ollama")
    narration = turn(CampaignFactory(owner=alice, endpoint=profile))
    [sent] = _chats(model)
    assert sent["extra"] == {"top_p": 0.9}
    assert set(narration.snapshot.report["samplers"]["ignored"]) == {"min_p", "repetition_penalty", "dry_multiplier",
                                                                     "banned_strings"}


def test_a_refused_field_is_dropped_remembered_and_the_turn_goes_on(alice, model, turn):
    profile = EndpointProfileFactory(base_url=model.base_url, samplers=LOCAL)
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    model.script({"status": 400, "message": "Unrecognized request argument supplied: dry_multiplier"})
    first = turn(campaign)
    assert first.status == "done", first.error
    profile.refresh_from_db()
    assert profile.refused_samplers == ["dry_multiplier"]
    asked, again = _chats(model)
    assert "dry_multiplier" in asked["extra"] and "dry_multiplier" not in again["extra"]
    second = turn(campaign, "I wait.")
    assert "dry_multiplier" not in _chats(model)[-1]["extra"]
    assert second.snapshot.report["samplers"]["dropped"] == ["dry_multiplier"]


def test_a_refusal_that_names_no_sampler_still_fails_the_turn(alice, model, turn):
    profile = EndpointProfileFactory(base_url=model.base_url, samplers=LOCAL)
    model.script({"status": 400, "message": "Something else is wrong."})
    narration = turn(CampaignFactory(owner=alice, endpoint=profile))
    assert narration.status == "failed"


def test_values_are_checked_against_their_ranges():
    assert samplers.clean("min_p", "0.05") == 0.05
    assert samplers.clean("top_k", "40") == 40
    assert samplers.clean("dry_sequence_breakers", "\\n\n:\n\n") == ["\\n", ":"]
    assert samplers.clean("min_p", "  ") is None
    with pytest.raises(ValueError, match="between 0 and 1"):
        samplers.clean("min_p", "3")
    with pytest.raises(ValueError, match="whole number"):
        samplers.clean("top_k", "4.5")


def test_the_profile_page_shows_what_this_backend_does_with_each_setting(admin_client, model):
    profile = EndpointProfileFactory(base_url=model.base_url, samplers=LOCAL, backend="vllm")
    page = admin_client.get(reverse("admin:endpoints_endpointprofile_change", args=[profile.pk])).content.decode()
    assert "vLLM (chosen on this profile)." in page
    assert "sent as “repetition_penalty”" in page and "ignored by vLLM" in page
    assert "sent as “bad_words”" in page


def test_the_campaign_form_saves_overrides_and_refuses_out_of_range(alice, client, model):
    campaign = CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url))
    client.force_login(alice)
    url = reverse("campaign_edit", args=[campaign.pk])
    form = client.get(url).context["form"]
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data.update({"title": campaign.title, "narration_length": campaign.narration_length,
                 "endpoint": campaign.endpoint_id, "sampler_min_p": "0.1", "sampler_stop": "THE END"})
    assert client.post(url, data).status_code == 302
    campaign.refresh_from_db()
    assert campaign.sampler_overrides == {"min_p": 0.1, "stop": ["THE END"]}
    data["sampler_xtc_probability"] = "7"
    page = client.post(url, data).content.decode()
    assert "XTC probability must be between 0 and 1." in page


def test_a_template_that_refuses_the_system_role_gets_it_folded_into_the_first_turn(alice, model, turn):
    model.template_refuses = {"system"}
    profile = EndpointProfileFactory(base_url=model.base_url)
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    first = turn(campaign)
    assert first.status == "done", first.error
    profile.refresh_from_db()
    assert profile.role_folds == ["system"]
    refused, folded = _chats(model)
    assert refused["messages"][0]["role"] == "system"
    assert folded["messages"][0]["role"] == "user"
    assert folded["messages"][0]["content"].startswith(refused["messages"][0]["content"])
    turn(campaign, "I wait.")
    assert len(_chats(model)) == 3 and all(m["role"] != "system" for m in _chats(model)[-1]["messages"])


def test_a_template_that_needs_alternating_roles_gets_neighbours_joined(alice, model, turn):
    from endpoints import rolefolds

    assert rolefolds.refused("Conversation roles must alternate user/assistant/user/assistant/...") == {"alternate"}
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                {"role": "system", "content": "Lore"}, {"role": "user", "content": "U2"}]
    assert rolefolds.folded(messages, ["alternate"]) == [
        {"role": "system", "content": "S"}, {"role": "user", "content": "U\n\nLore\n\nU2"}]
    assert rolefolds.folded(messages, ["system"]) == [{"role": "user", "content": "S\n\nU\n\nLore\n\nU2"}]
