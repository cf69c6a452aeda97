"""One JSON line per request and per task, with what and how long, and no story text."""

import asyncio
import json
import logging
import sys

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
