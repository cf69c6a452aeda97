"""The reader's pages in a real browser: Debian's Chromium driven by
Playwright, against the real app (uvicorn and a Celery worker as separate
processes, the scripted model server on loopback), at 1280 and 390 px.

The servers start once for these tests and share the test database; each test
gets a fresh browser context holding alice's session (made server-side; only
the test of the log-in form types a password). A failing test keeps a
screenshot of its page in BROWSER_ARTIFACTS (named in the failure). Any
console error fails the test that caused it.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests import live
from tests.factories import CampaignFactory, EndpointProfileFactory, UserFactory

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
ARTIFACTS = Path(os.environ.get("BROWSER_ARTIFACTS", live.ROOT / "var" / "browser-failures"))

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)")
if not CHROMIUM.exists():
    pytest.skip(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="package")
def browser():
    """Playwright's sync API runs an event loop in this thread while it is
    open; the ORM calls the tests make between browser steps are ordinary
    blocking calls, so Django is told they are safe for as long as it runs."""
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with playwright_api.sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="package")
def servers(django_db_setup, django_db_blocker):
    """uvicorn and one Celery worker for the browser tests, stopped before
    the rest of the suite (whose tests start workers of their own)."""
    with django_db_blocker.unblock(), live.web_server() as base, live.worker():
        yield base


@pytest.fixture
def base(servers, transactional_db):
    """The app's address; the test's rows are committed, so the servers see
    them. Afterwards it waits for the worker to finish what the test started:
    emptying the tables under a busy worker deadlocks on PostgreSQL."""
    yield servers
    from knowledge.models import IndexJob
    from storyapp.models import Action

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        IndexJob.objects.filter(state__in=IndexJob.ACTIVE).exists()
        or Action.objects.filter(status__in=[Action.Status.PENDING, Action.Status.STREAMING]).exists()
    ):
        time.sleep(0.2)


@pytest.fixture
def campaign(alice, model):
    return CampaignFactory(owner=alice, endpoint=EndpointProfileFactory(base_url=model.base_url),
                           title="The Drowned Lantern")


@pytest.fixture(params=list(WIDTHS))
def width(request):
    return request.param


def _new_page(browser, base, width, *, errors: list[str]):
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h}, base_url=base,
                                  is_mobile=width == "phone", has_touch=width == "phone")
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    return context, page


def signed_in(context, base: str, user) -> None:
    """Gives the browser `user`'s session, made server-side as `force_login`
    makes it: typing a password is for the test of the log-in form alone
    (test_pages_in_browser.py), and the tests' fast password hasher is one the
    live servers do not accept."""
    session = Client()
    session.force_login(user)
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": base,
                          "value": session.cookies[settings.SESSION_COOKIE_NAME].value}])


@pytest.fixture
def page(request, browser, base, width, alice):
    """A logged-in page for alice; console errors fail the test, a failure keeps a screenshot."""
    errors: list[str] = []
    context, page = _new_page(browser, base, width, errors=errors)
    signed_in(context, base, alice)
    page.console_errors = errors
    yield page
    failed = getattr(request.node, "report_call", None) is not None and request.node.report_call.failed
    if failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', request.node.nodeid)}.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot of the failing page: {shot}")
    context.close()
    if not failed:
        assert not errors, f"console errors: {errors}"


@pytest.fixture
def other_page(browser, base):
    """A second reader's browser, for privacy checks."""
    errors: list[str] = []
    context, page = _new_page(browser, base, "desktop", errors=errors)
    signed_in(context, base, UserFactory(username="bob"))
    yield page
    context.close()
