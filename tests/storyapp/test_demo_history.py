"""A campaign moved from the scripted demo narrator to a real model: the
demo's disclaimer stays on the page, never in what the model is sent."""

from demomodel import DISCLAIMER
from storyapp import modelprose
from storyapp.models import Action
from tests.factories import ActionFactory, EndpointProfileFactory


def sent_texts(model) -> str:
    return "\n".join(m["content"] for r in model.requests() for m in r.get("messages", []))


def test_demo_turns_reach_a_real_model_without_the_demo_disclaimer(campaign, play, model):
    campaign.endpoint = EndpointProfileFactory(base_url=model.base_url, name="Scripted demo", is_scripted_demo=True)
    campaign.save()
    for text in ("I walk to the quay.", "I hail the ferryman."):
        _, narration = play(text)
        assert narration.status == Action.Status.DONE and narration.text.startswith(DISCLAIMER)
    campaign.endpoint = EndpointProfileFactory(base_url=model.base_url, name="A real model")
    campaign.save()
    model.clear_requests()
    model.script({"reply": 'The ferryman takes your coin.\n<state>{"events": []}</state>'})
    _, narration = play("I step aboard.")
    assert narration.status == Action.Status.DONE
    sent = sent_texts(model)
    assert "I hail the ferryman." in sent and "I step aboard." in sent
    assert DISCLAIMER not in sent and "scripted demo" not in sent
    assert DISCLAIMER not in "\n".join(m["content"] for m in narration.snapshot.messages)


def test_only_a_narration_loses_the_disclaimer_and_its_count_is_redone(campaign):
    demo = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text=f"{DISCLAIMER}\n\nRain needles the cobbles.")
    quoted = ActionFactory(campaign=campaign, kind=Action.Kind.PLAYER, text=f"I shout: {DISCLAIMER}")
    record = modelprose.history_record(demo)
    assert record.text == "Rain needles the cobbles." and record.tokens is None
    assert modelprose.history_record(quoted).text == quoted.text
    plain = ActionFactory(campaign=campaign, kind=Action.Kind.AI, text="Gulls wheel.")
    assert modelprose.history_record(plain).tokens == plain.token_count
