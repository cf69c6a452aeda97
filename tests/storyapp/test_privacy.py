"""No reader can see or change another reader's objects, by page or by URL guessing.

The test walks every URL pattern of the project: one that takes an id must
answer 404 to an outsider for both GET and POST, and a pattern whose id
parameter this test does not know how to fill fails the test, so a new URL
cannot slip in without coverage.
"""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from knowledge.models import LoreEntry
from storyapp.models import Action, Campaign
from tests.factories import CampaignFactory, IndexJobFactory, KnowledgeSourceFactory, story

OWN_PREFIXES = ("storyapp.", "knowledge.")


def _patterns(resolver=None, names=()):
    """(pattern, every id parameter on its route, including its includes')."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        own = tuple(entry.pattern.regex.groupindex)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, names + own)
        elif isinstance(entry, URLPattern):
            yield entry, names + own


def _id_patterns():
    return [
        (pattern, names)
        for pattern, names in _patterns()
        if names and getattr(pattern.callback, "__module__", "").startswith(OWN_PREFIXES)
        # Admin pages belong to staff, behind the admin's own login (tested
        # in test_window_probe); readers own nothing there.
        and not getattr(pattern.callback, "__module__", "").endswith(".admin")
    ]


@pytest.fixture
def alices_story(alice, endpoint):
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    actions = story(campaign, "I walk to the quay.", "Gulls wheel over the tide.")
    return campaign, actions


def _kwargs_for(pattern: URLPattern, names: tuple, campaign: Campaign, actions: list[Action]) -> dict:
    source = KnowledgeSourceFactory(campaign=campaign, format="SillyTavern World Info")
    entry = LoreEntry.objects.create(source=source, position=0, title="Alice's entry", keys=["quay"])
    known = {"pk": campaign.pk, "action_id": actions[-1].pk, "source_id": source.pk,
             "job_id": IndexJobFactory(source=source).pk, "entry_id": entry.pk}
    missing = [name for name in names if name not in known]
    assert not missing, f"{pattern.name} takes {missing}: teach test_privacy how to fill them"
    return {name: known[name] for name in names}


def test_every_url_with_an_id_is_covered():
    names = {pattern.name for pattern, _ in _id_patterns()}
    assert {"campaign_play", "action_stream", "turn_submit", "action_edit"} <= names


@pytest.mark.parametrize("method", ["get", "post"])
def test_an_outsider_gets_404_for_every_url_of_anothers_campaign(client, bob, alices_story, method):
    campaign, actions = alices_story
    head_before = campaign.head_id
    texts_before = list(Action.objects.order_by("id").values_list("text", flat=True))
    client.force_login(bob)
    for pattern, names in _id_patterns():
        url = reverse(pattern.name, kwargs=_kwargs_for(pattern, names, campaign, actions))
        response = getattr(client, method)(url, {"text": "bob was here", "before": actions[-1].pk})
        # A method the view never accepts is refused before any lookup, the
        # same for every id, so it confirms nothing.
        nowhere = reverse(pattern.name, kwargs={name: 987654 for name in names})
        expected = 405 if getattr(client, method)(nowhere).status_code == 405 else 404
        assert response.status_code == expected, f"{method.upper()} {url} ({pattern.name}) gave {response.status_code}"
    campaign.refresh_from_db()
    assert campaign.head_id == head_before
    assert list(Action.objects.order_by("id").values_list("text", flat=True)) == texts_before
    assert set(LoreEntry.objects.values_list("title", flat=True)) == {"Alice's entry"}


def test_an_action_of_one_campaign_is_not_reachable_through_another(client, alice, alices_story):
    campaign, actions = alices_story
    other = CampaignFactory(owner=alice)
    client.force_login(alice)
    url = reverse("action_edit", kwargs={"pk": other.pk, "action_id": actions[0].pk})
    assert client.get(url).status_code == 404


def test_a_reader_lists_only_their_own_campaigns(client, alice, bob, alices_story):
    CampaignFactory(owner=bob, title="Bob's secret saga")
    client.force_login(alice)
    page = client.get(reverse("campaign_list")).content.decode()
    assert alices_story[0].title in page and "Bob&#x27;s secret saga" not in page


def test_pages_need_a_login(client, alices_story):
    response = client.get(reverse("campaign_play", kwargs={"pk": alices_story[0].pk}))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
