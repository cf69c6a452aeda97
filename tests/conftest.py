import pytest

from storyapp.celery import app as celery_app

pytest_plugins = ["tests.model_server"]


@pytest.fixture(autouse=True)
def celery_eager():
    """Tasks run in-process where the test commits; tests that need a real
    worker start one (see tests/storyapp/test_worker.py)."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture(autouse=True)
def fresh_login_throttle():
    """Failed log-ins are counted in the cache, which the live servers share
    on disk (var/cache): a test's wrong passwords must not lock the next
    test's reader out."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice(db):
    from tests.factories import UserFactory

    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    from tests.factories import UserFactory

    return UserFactory(username="bob")


@pytest.fixture
def endpoint(db, model):
    from tests.factories import EndpointProfileFactory

    return EndpointProfileFactory(base_url=model.base_url)


@pytest.fixture
def library():
    """Adds a source to a campaign and indexes it in-process, as a worker would."""
    from knowledge import services

    def add(campaign, text, *, filename="lore.md", **options):
        source = services.source_create(campaign=campaign, filename=filename, text=text, enqueue=False, **options)
        return services.source_index_now(source)

    return add
