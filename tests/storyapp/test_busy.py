"""A pool with no connection to give (issue 23, findings 8 and 9): a short
wait retried once, then a 503 page with Retry-After, never a bare 500; a
stream that meets it ends so the browser reconnects by itself."""

import asyncio
from importlib import import_module

import pytest
from django.conf import settings
from django.db import OperationalError
from django.db.models import QuerySet
from django.test import Client
from django.urls import reverse
from psycopg_pool import PoolTimeout

from storyapp.models import Action
from storyapp.postgresql import base as pool_backend
from storyapp.views import stream
from storyapp.views.busy import BUSY_MESSAGE, is_pool_timeout


def _pool_timeout() -> OperationalError:
    try:
        try:
            raise PoolTimeout("couldn't get a connection after 3.00 sec")
        except PoolTimeout as exc:
            raise OperationalError(str(exc)) from exc
    except OperationalError as wrapped:
        return wrapped


def _session_store():
    """The configured session store, whose load is the first query of a page."""
    return import_module(settings.SESSION_ENGINE).SessionStore


def test_only_a_pool_timeout_is_busy():
    assert is_pool_timeout(_pool_timeout())
    assert not is_pool_timeout(OperationalError("relation does not exist"))
    assert not is_pool_timeout(ValueError("couldn't get a connection"))


@pytest.mark.django_db
def test_a_page_whose_session_finds_the_pool_empty_answers_503(alice, monkeypatch):
    client = Client(raise_request_exception=False)
    client.force_login(alice)

    def empty_pool(self):
        raise _pool_timeout()

    monkeypatch.setattr(_session_store(), "load", empty_pool)
    response = client.get(reverse("campaign_list"))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert BUSY_MESSAGE in response.content.decode()


@pytest.mark.django_db
def test_any_other_fault_is_still_a_500(alice, monkeypatch):
    client = Client(raise_request_exception=False)
    client.force_login(alice)

    def broken(self):
        raise OperationalError("relation does not exist")

    monkeypatch.setattr(_session_store(), "load", broken)
    assert client.get(reverse("campaign_list")).status_code == 500


def test_the_pool_wait_is_retried_once(monkeypatch):
    calls = []

    def get_new_connection(self, conn_params):
        calls.append(conn_params)
        if len(calls) == 1:
            raise PoolTimeout("couldn't get a connection after 3.00 sec")
        return "a connection"

    monkeypatch.setattr(pool_backend.base.DatabaseWrapper, "get_new_connection", get_new_connection)
    wrapper = object.__new__(pool_backend.DatabaseWrapper)
    assert pool_backend.DatabaseWrapper.get_new_connection(wrapper, {}) == "a connection"
    assert len(calls) == 2


def _events(response) -> str:
    async def read():
        return "".join([part.decode() if isinstance(part, bytes) else part async for part in response])

    return asyncio.run(read())


@pytest.mark.django_db(transaction=True)
def test_a_stream_that_finds_the_pool_empty_ends_for_the_browser_to_reconnect(campaign, monkeypatch):
    narration = Action.objects.create(campaign=campaign, kind=Action.Kind.AI, status=Action.Status.STREAMING,
                                      text="The gulls")

    async def busy(self):
        raise _pool_timeout()

    monkeypatch.setattr(QuerySet, "afirst", busy)
    client = Client()
    client.force_login(campaign.owner)
    response = client.get(reverse("action_stream", args=[campaign.pk, narration.pk]))
    events = _events(response.streaming_content)
    assert f"retry: {stream.RECONNECT_AFTER_BUSY_MS}" in events
    assert "event: done" not in events
