"""Fixtures every folder shares, and the layer each test is in.

Every test gets exactly one layer mark, from what it uses: `live` when it
starts live processes (uvicorn, a Celery worker, llama-cpp-python's server)
and for every browser test, `db` when it uses the database, `pure` for the
rest. CI runs `-m "not live"` on SQLite and `-m "not pure"` on PostgreSQL +
Redis (the hosted mode), so pure tests run once and live ones only hosted.
"""

from pathlib import Path

import pytest
from django.core.cache import cache
from django.utils import timezone

import quotas
from knowledge import retrieval
from knowledge import services as knowledge_services
from knowledge.worldinfo import loading as worldinfo_loading
from storyapp import services
from storyapp.celery import app as celery_app
from tests.factories import CampaignFactory, EndpointProfileFactory, UserFactory

pytest_plugins = ["tests.model_server"]

LAYERS = ("pure", "db", "live")
#: Fixtures that start live processes, or hand tasks to one.
LIVE_FIXTURES = {"servers", "stack", "real_broker", "llama_server", "embedding_server", "start_llama_server",
                 "live_server"}
DB_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"}
BROWSER = Path(__file__).parent / "browser"


def layer_of(item) -> str:
    used = set(getattr(item, "fixturenames", ())) - set(getattr(item, "callspec", None) and item.callspec.params or ())
    if used & LIVE_FIXTURES or BROWSER in Path(item.path).parents:
        return "live"
    if used & DB_FIXTURES or item.get_closest_marker("django_db"):
        return "db"
    return "pure"


def pytest_collection_modifyitems(config, items):
    for item in items:
        marked = [layer for layer in LAYERS if item.get_closest_marker(layer)]
        if marked:
            raise pytest.UsageError(f"{item.nodeid} is marked {marked}: layers are set by tests/conftest.py alone")
        item.add_marker(getattr(pytest.mark, layer_of(item)))


def pytest_report_collectionfinish(config, start_path, items):
    counts = {layer: sum(1 for item in items if item.get_closest_marker(layer)) for layer in LAYERS}
    return "layers: " + ", ".join(f"{counts[layer]} {layer}" for layer in LAYERS)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Readers are made with a password; Django's default hasher costs half a
    second of CPU per user made and per log-in, which was most of the suite's
    time. Live servers hash with their own settings (see tests/live.py)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def celery_eager():
    """Tasks run in-process where the test commits; tests that need a real
    worker start one (tests/storyapp/test_live_turns.py,
    tests/knowledge/test_worker_kill.py)."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture(autouse=True)
def fresh_lorebooks():
    """The loaded lorebooks are cached per process on the library stamp,
    and a rolled-back test's campaign and sources reuse the next test's ids
    and revisions: each test loads its own."""
    worldinfo_loading.clear()
    yield
    worldinfo_loading.clear()


@pytest.fixture
def one_quota_window(monkeypatch):
    """Readers' rates counted in the middle of one window: two requests
    either side of a minute's end would each be the first of their own."""
    monkeypatch.setattr(quotas, "clock", lambda: 1_800_000_030.0)


@pytest.fixture(autouse=True)
def fresh_login_throttle():
    """Readers' rates are counted in the cache, which the live servers share
    on disk (var/cache): one test's turns must not use up the next test's
    reader's. (Failed log-ins are in the database, rolled back per test.)"""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice(db):
    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob")


@pytest.fixture
def endpoint(db, model):
    return EndpointProfileFactory(base_url=model.base_url)


@pytest.fixture
def campaign(alice, endpoint):
    """Alice's campaign on the scripted model server. Folders and modules
    whose story needs another start override it under the same name, so that
    `play` plays on theirs."""
    return CampaignFactory(owner=alice, endpoint=endpoint)


@pytest.fixture
def play(campaign, django_capture_on_commit_callbacks):
    """Plays one turn on `campaign`: the reader's action committed, its
    narration run where the test commits, as a worker would; returns both,
    fresh."""

    def submit(text: str):
        with django_capture_on_commit_callbacks(execute=True):
            player, narration = services.turn_submit(campaign=campaign, text=text, now=timezone.now())
        campaign.refresh_from_db()
        narration.refresh_from_db()
        return player, narration

    return submit


@pytest.fixture
def fresh_retrieval_cache():
    """No library matrix or term profile cached from another test, before or after."""
    retrieval.clear_cache()
    yield
    retrieval.clear_cache()


@pytest.fixture
def library():
    """Adds a source to a campaign and indexes it in-process, as a worker would."""

    def add(campaign, text, *, filename="lore.md", **options):
        source = knowledge_services.source_create(campaign=campaign, filename=filename, text=text, enqueue=False, **options)
        return knowledge_services.source_index_now(source)

    return add
