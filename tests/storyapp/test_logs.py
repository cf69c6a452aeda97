"""One JSON line per request and per task, with what and how long, and no story text."""

import asyncio
import json
import logging
import sys

import pytest

from django.utils import timezone

from storyapp import logs, services
from tests.factories import CampaignFactory


def lines(caplog, name):
    formatter = logs.JsonFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == name]


def test_a_request_logs_one_json_line_with_its_campaign_and_duration(caplog):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b"secret story text"})

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    sent = []

    async def send(message):
        sent.append(message)

    caplog.set_level(logging.INFO, logger="loremaster.request")
    scope = {"type": "http", "method": "GET", "path": "/campaigns/7/actions/42/context/", "headers": []}
    asyncio.run(logs.RequestLog(app)(scope, receive, send))
    [line] = lines(caplog, "loremaster.request")
    assert (line["method"], line["status"], line["campaign"], line["action"]) == ("GET", 404, 7, 42)
    assert line["duration_ms"] >= 0 and len(sent) == 2 and "secret story" not in json.dumps(line)


def test_a_task_logs_one_json_line(alice, endpoint, model, caplog, django_capture_on_commit_callbacks):
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    caplog.set_level(logging.INFO, logger="loremaster.task")
    model.script({"reply": "The secret is the red door."})
    with django_capture_on_commit_callbacks(execute=True):
        services.turn_submit(campaign=campaign, text="I whisper.", now=timezone.now())
    [narration] = [t for t in lines(caplog, "loremaster.task") if t["task"] == "storyapp.tasks.narrate_action"]
    assert narration["state"] == "SUCCESS" and narration["duration_ms"] >= 0 and narration["ids"]
    assert "red door" not in json.dumps(lines(caplog, "loremaster.task"))


def test_a_traceback_stays_inside_its_line():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord("x", logging.ERROR, "f", 1, "failed", (), sys.exc_info())
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line and "Traceback" in json.loads(line)["exc"]


def test_a_worker_keeps_the_apps_log_handlers():
    """Celery would swap the root logger's handlers for its plain-text one,
    and the workers' JSON lines would be lost."""
    from storyapp.celery import app

    root = logging.getLogger()
    before = list(root.handlers)
    app.log.already_setup = False
    app.log.setup_logging_subsystem(loglevel="INFO")
    assert root.handlers == before and before


def _one_request():
    """An ASGI receive: the empty body, then nothing until the app is done."""
    messages = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive():
        if messages:
            return messages.pop()
        await asyncio.Event().wait()

    return receive


@pytest.mark.django_db(transaction=True)
def test_a_request_line_names_the_reader_without_a_query_of_its_own(client, caplog):
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from storyapp.asgi import application

    reader = get_user_model().objects.create_user("reba", password="pw-for-reba-0")
    client.force_login(reader)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()
    caplog.set_level(logging.INFO, logger="loremaster.request")
    logging.getLogger("loremaster.request").addHandler(caplog.handler)  # it does not propagate to the root

    async def send(message):
        pass

    for path in ("/campaigns/", "/healthz"):
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "path": path,
                 "raw_path": path.encode(), "query_string": b"", "headers": [(b"cookie", cookie), (b"host", b"testserver")],
                 "server": ("testserver", 80), "client": ("127.0.0.1", 5000), "scheme": "http", "root_path": ""}
        asyncio.run(application(scope, _one_request(), send))
    logging.getLogger("loremaster.request").removeHandler(caplog.handler)
    by_path = {line["path"]: line for line in lines(caplog, "loremaster.request")}
    listed, health = by_path["/campaigns/"], by_path["/healthz"]
    assert (listed["status"], listed["reader"]) == (200, reader.pk)
    assert health["reader"] is None, "a page that never loaded the user does not load it to log it"
