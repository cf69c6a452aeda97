import factory
from django.contrib.auth import get_user_model

from contextbuild.tokens import count_tokens
from endpoints.models import EndpointProfile
from storyapp.models import Action, Campaign, Membership, Memory

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"reader{n}")
    password = factory.django.Password(PASSWORD)


class EndpointProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = EndpointProfile

    name = factory.Sequence(lambda n: f"Endpoint {n}")
    base_url = "http://127.0.0.1:9/v1"
    chat_model = "demo-narrator"
    embedding_model = "demo-embed"
    max_output_tokens = 300
    context_token_budget = 4096
    first_byte_timeout_seconds = 10
    timeout_seconds = 10


class CampaignFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Campaign

    owner = factory.SubFactory(UserFactory)
    title = factory.Sequence(lambda n: f"Campaign {n}")
    persona_name = "Mara"
    plot_essentials = "Mara carries the broken seal."


class MembershipFactory(factory.django.DjangoModelFactory):
    """A player in someone's campaign, seated as a character of their own
    (a watcher, `role=Membership.Role.WATCHER`, holds no seat)."""

    class Meta:
        model = Membership

    campaign = factory.SubFactory(CampaignFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.PLAYER
    seat_name = factory.LazyAttributeSequence(lambda o, n: f"Seat {n}" if o.role == Membership.Role.PLAYER else "")


class ActionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Action

    campaign = factory.SubFactory(CampaignFactory)
    parent = None
    kind = Action.Kind.PLAYER
    text = factory.Sequence(lambda n: f"Action number {n}.")
    depth = factory.LazyAttribute(lambda o: o.parent.depth + 1 if o.parent else 0)
    token_count = factory.LazyAttribute(lambda o: count_tokens(o.text))


class MemoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Memory

    campaign = factory.SubFactory(CampaignFactory)
    anchor = factory.SubFactory(ActionFactory, campaign=factory.SelfAttribute("..campaign"))
    authority = Memory.Authority.RECORDED
    text = factory.Sequence(lambda n: f"Mara learned secret number {n}.")
    token_count = factory.LazyAttribute(lambda o: count_tokens(o.text))


def story(campaign: Campaign, *texts: str) -> list[Action]:
    """A straight lineage of alternating player/narrator actions, head at the end."""
    actions: list[Action] = []
    parent = None
    for index, text in enumerate(texts):
        kind = Action.Kind.PLAYER if index % 2 == 0 else Action.Kind.AI
        parent = ActionFactory(campaign=campaign, parent=parent, kind=kind, text=text)
        actions.append(parent)
    campaign.head = parent
    campaign.save()
    return actions


# ---------------------------------------------------------------- Knowledge

from knowledge.models import IndexJob, KnowledgeSource  # noqa: E402
from knowledge.services import content_hash  # noqa: E402


class KnowledgeSourceFactory(factory.django.DjangoModelFactory):
    """A stored source, not yet indexed; `tests/knowledge/conftest.py` has
    `library` for sources indexed through the real pipeline."""

    class Meta:
        model = KnowledgeSource

    campaign = factory.SubFactory(CampaignFactory)
    title = factory.Sequence(lambda n: f"Lore {n}")
    original_filename = factory.LazyAttribute(lambda o: f"{o.title.lower().replace(' ', '-')}.md")
    content = factory.Sequence(lambda n: f"# Westhaven\n\n## The Harbour\n\nTides run high at Westhaven, note {n}.\n")
    sha256 = factory.LazyAttribute(lambda o: content_hash(o.content))
    size_bytes = factory.LazyAttribute(lambda o: len(o.content.encode()))


class IndexJobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = IndexJob

    source = factory.SubFactory(KnowledgeSourceFactory)
    content_sha256 = factory.LazyAttribute(lambda o: o.source.sha256)


def world_info_book(*entries: dict, name: str = "Harbour") -> bytes:
    """A SillyTavern World Info file of these entries (each a dict of
    SillyTavern's fields; `uid` is filled in from the order)."""
    import json

    return json.dumps({"name": name, "entries": {str(i): {"uid": i, **e} for i, e in enumerate(entries)}}).encode()


def hundred_entries() -> list[dict]:
    """A book of 100 entries: the three a harbour scene names, fired in
    three places, and 97 no scene names."""
    named = [
        {"comment": "Lantern Guild", "key": ["lantern"], "content": "The Lantern Guild lights the quay."},
        {"comment": "Storm", "key": ["storm"], "content": "Storms close the harbour mouth.", "position": 4,
         "depth": 1, "sticky": 3},
        {"comment": "Harbour master", "key": ["harbour"], "content": "The harbour master is Oren Vell.",
         "position": 1},
    ]
    return named + [
        {"comment": f"Far island {i}", "key": [f"island{i}"], "content": f"Island {i} lies far to the south."}
        for i in range(97)
    ]


# ---------------------------------------------------------------- World Info

from worldinfo.records import Entry  # noqa: E402


class EntryFactory(factory.Factory):
    """A World Info entry as the engine reads it: keyed on its title's
    first word unless given keys, one token a word."""

    class Meta:
        model = Entry

    key = factory.Sequence(lambda n: f"book.{n}")
    title = factory.Sequence(lambda n: f"Entry {n}")
    book = "book"
    content = factory.LazyAttribute(lambda o: f"About {o.title}.")
    fingerprint = factory.LazyAttribute(lambda o: f"{o.key}:{o.content}")
    tokens = factory.LazyAttribute(lambda o: len(o.content.split()))

