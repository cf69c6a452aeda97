"""Real processes for end-to-end tests: uvicorn serving the ASGI app and a
Celery worker, both pointed at the test database and the test broker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
from django.conf import settings
from django.db import connection
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = database_url()
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def process(*args: str, ready=None, timeout: float = 30, env: dict[str, str] | None = None):
    """The process, its output going to a file: a pipe nobody reads fills up
    (64 KB) and then blocks the process on its next log line, which is how
    a server logging a line per request stalled the browser tests."""
    with tempfile.TemporaryFile(mode="w+") as output:
        proc = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env={**environment(), **(env or {})},
            stdout=output, stderr=subprocess.STDOUT, text=True,
        )
        try:
            deadline = time.monotonic() + timeout
            while ready is not None and not ready():
                if proc.poll() is not None or time.monotonic() > deadline:
                    output.seek(0)
                    raise RuntimeError(f"{args[:3]} did not start: {output.read()[-2000:]}")
                time.sleep(0.2)
            yield proc
        finally:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def web_server(port: int | None = None, env: dict[str, str] | None = None):
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        try:
            return httpx.get(f"{base}/accounts/login/", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    with process("-m", "uvicorn", "storyapp.asgi:application", "--port", str(port), "--log-level", "warning",
                 "--no-proxy-headers", ready=answering, env=env):
        yield base


@contextmanager
def worker():
    with process("-m", "celery", "-A", "storyapp", "worker", "--pool=solo", "--queues=celery,narration",
                 "--loglevel=WARNING",
                 "--without-mingle", "--without-gossip") as proc:
        yield proc


def logged_in(base: str, user) -> httpx.Client:
    """An HTTP client holding `user`'s session, made server-side as
    `force_login` makes it: the tests hash passwords with a fast hasher the
    live servers do not accept, and the log-in form has tests of its own
    (tests/storyapp/test_hardening.py, tests/browser/test_pages_in_browser.py)."""
    session = Client()
    session.force_login(user)
    client = httpx.Client(base_url=base, timeout=30)
    client.get("/accounts/login/")
    assert "csrftoken" in client.cookies, "the log-in page set no CSRF cookie"
    client.cookies.set(settings.SESSION_COOKIE_NAME, session.cookies[settings.SESSION_COOKIE_NAME].value)
    return client


def wait_for(predicate, *, timeout: float = 60, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("timed out waiting")
