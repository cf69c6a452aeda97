"""Bundles carry a campaign's long memory: its summaries and memories, anchored to the bundle's actions."""

import copy
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from storyapp import services
from storyapp.bundle import BundleError
from storyapp.bundle.export import export
from storyapp.bundle.importer import import_bundle
from storyapp.models import Action, DerivedJob, Memory, Summary
from tests.factories import CampaignFactory, EndpointProfileFactory
from tests.storyapp.test_bundle import EXAMPLE


def narration(turn: int) -> str:
    """A narration long enough that a dozen turns outgrow a 2048-token window, with a state block."""
    prose = f"Mara uncovers relic {turn} in chamber {turn}. " + "The walls drip and the lamps gutter low. " * 10
    block = {"events": [
        {"type": "scene", "summary": f"Mara holds relic {turn}", "location": f"chamber {turn}"},
        {"type": "entity", "id": f"relic-{turn}", "name": f"Relic {turn}", "status": "found"},
    ]}
    return f"{prose.strip()}\n<state>{json.dumps(block)}</state>"


@pytest.fixture
def profile(model):
    return EndpointProfileFactory(base_url=model.base_url, context_token_budget=2048, max_output_tokens=200)


@pytest.fixture
def play_chamber(model, django_capture_on_commit_callbacks):
    """`play` on any campaign with the narration scripted (chamber `number`),
    asserted done; returns the narration."""

    def turn(campaign, number: int) -> Action:
        model.script({"reply": narration(number)})
        with django_capture_on_commit_callbacks(execute=True):
            _, done = services.turn_submit(campaign=campaign, text=f"I search chamber {number}.", now=timezone.now())
        done.refresh_from_db()
        campaign.refresh_from_db()
        assert done.status == Action.Status.DONE, done.error
        return done

    return turn


@pytest.fixture
def remembered(alice, profile, play_chamber):
    """A campaign played until it has summaries and both kinds of memory."""
    campaign = CampaignFactory(owner=alice, endpoint=profile, persona_name="Mara",
                               initial_state={"scene": {"summary": "Mara enters the vault.", "location": "the vault"}})
    for number in range(1, 13):
        play_chamber(campaign, number)
    assert Summary.objects.filter(campaign=campaign).exists()
    assert Memory.objects.filter(campaign=campaign, authority=Memory.Authority.INFERRED).exists()
    return campaign


def test_the_export_carries_summaries_and_memories_by_action_reference(remembered):
    data = export(remembered)
    refs = {a["id"] for a in data["actions"]}
    summaries = {s["id"]: s for s in data["summaries"]}
    assert summaries and all(s["covers_through"] in refs for s in summaries.values())
    assert all(s["starts_after"] in refs | {None} and s["text"] for s in summaries.values())
    assert {m["authority"] for m in data["memories"]} == {"recorded", "inferred"}
    inferred = [m for m in data["memories"] if m["authority"] == "inferred"]
    assert all(m["summary"] in summaries and m["anchor"] in refs for m in inferred)
    assert not any("embedding" in m for m in data["memories"])


def test_an_imported_campaign_uses_its_imported_summary_in_the_next_prompt(remembered, alice, profile, play_chamber):
    data = json.loads(json.dumps(export(remembered)))
    copied = import_bundle(data, owner=alice)
    assert Summary.objects.filter(campaign=copied).count() == len(data["summaries"])
    assert Memory.objects.filter(campaign=copied).count() == len(data["memories"])
    inferred = Memory.objects.filter(campaign=copied, authority=Memory.Authority.INFERRED)
    assert inferred.exists() and all(m.summary.campaign_id == copied.pk for m in inferred)
    jobs = DerivedJob.objects.filter(campaign=copied)
    assert jobs.filter(kind=DerivedJob.Kind.SUMMARY).count() == len(data["summaries"])
    assert not jobs.exclude(state=DerivedJob.State.DONE).exists()

    copied.endpoint = profile
    copied.save(update_fields=["endpoint"])
    imported = set(Summary.objects.filter(campaign=copied).values_list("pk", flat=True))
    out = StringIO()
    call_command("build_context", campaign=copied.pk, json=True, stdout=out)
    preview = json.loads(out.getvalue())
    assert preview["summary"] and {part["id"] for part in preview["summary"]["parts"]} <= imported
    turn = play_chamber(copied, 13)
    report = turn.snapshot.report
    assert report["summary"] and report["summary"]["parts"]
    # The prompt is built before this turn's own derived work runs: its chain is the imported one.
    assert {part["id"] for part in report["summary"]["parts"]} <= imported
    assert report["summary"]["text"].split("\n\n")[0] in "\n".join(m["content"] for m in turn.snapshot.messages)


def test_a_round_trip_keeps_the_long_memory(remembered, alice):
    first = export(remembered)
    second = export(import_bundle(json.loads(json.dumps(first)), owner=alice))

    def shape(data):
        texts = {a["id"]: a["text"] for a in data["actions"]}
        summaries = sorted((texts[s["covers_through"]], s["level"], s["text"]) for s in data["summaries"])
        memories = sorted((texts[m["anchor"]], m["authority"], m["text"]) for m in data["memories"])
        return summaries, memories

    assert shape(second) == shape(first)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: b["summaries"][0].update(covers_through="a9"), "covers_through names “a9”"),
        (lambda b: b["summaries"][0].update(starts_after="a2"), "not an action before “a1”"),
        (lambda b: b["summaries"][0].update(text="  "), r"summaries\[0\]\.text is empty"),
        (lambda b: b["memories"][0].update(authority="guessed"), "recorded or inferred"),
        (lambda b: b["memories"][0].update(summary="s9"), "summary names “s9”"),
        (lambda b: b["memories"][0].update(anchor="a7"), "anchor names “a7”"),
        (lambda b: b["memories"][0].update(text="tide " * 2000), r"memories\[0\]\.text is 10,000 characters"),
        (lambda b: b["summaries"][0].update(text="tide " * 2000), r"at most 6,000 are accepted"),
        (lambda b: b["summaries"][0].update(level=10**20), "level should be from 0 to 64"),
    ],
)
def test_malformed_long_memory_is_refused_and_writes_nothing(alice, change, message):
    broken = copy.deepcopy(EXAMPLE)
    broken["summaries"] = [{"id": "s1", "starts_after": None, "covers_through": "a1", "level": 0,
                            "text": "Mara walked to the quay."}]
    broken["memories"] = [{"anchor": "a1", "authority": "inferred", "summary": "s1", "text": "Mara is at the quay."}]
    import_bundle(copy.deepcopy(broken), owner=alice)  # valid as written
    change(broken)
    before = Summary.objects.count(), Memory.objects.count()
    with pytest.raises(BundleError, match=message):
        import_bundle(broken, owner=alice)
    assert (Summary.objects.count(), Memory.objects.count()) == before


def test_a_bundle_without_long_memory_imports_as_before(alice):
    campaign = import_bundle(copy.deepcopy(EXAMPLE), owner=alice)
    assert not Summary.objects.filter(campaign=campaign).exists()
    assert not Memory.objects.filter(campaign=campaign).exists()
    assert not DerivedJob.objects.filter(campaign=campaign).exists()
