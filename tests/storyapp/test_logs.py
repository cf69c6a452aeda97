"""One JSON line per request and per task, with who and how long, and no story text."""

import json
import logging
import sys

from django.urls import reverse

from storyapp import logs
from tests.factories import PASSWORD, CampaignFactory


def lines(caplog, name):
    formatter = logs.JsonFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == name]


def test_a_request_and_its_task_each_log_one_json_line(client, alice, endpoint, model, caplog,
                                                      django_capture_on_commit_callbacks):
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    client.login(username="alice", password=PASSWORD)
    caplog.set_level(logging.INFO, logger="loremaster.request")
    caplog.set_level(logging.INFO, logger="loremaster.task")
    model.script({"reply": "The secret is the red door."})
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("turn_submit", args=[campaign.pk]), {"text": "I whisper the password."})
    [request] = [r for r in lines(caplog, "loremaster.request") if r["view"] == "turn_submit"]
    assert request["reader"] == alice.pk and request["campaign"] == campaign.pk and request["method"] == "POST"
    assert request["status"] in (200, 302) and request["duration_ms"] >= 0
    narrations = [t for t in lines(caplog, "loremaster.task") if t["task"] == "storyapp.tasks.narrate_action"]
    assert narrations and narrations[0]["state"] == "SUCCESS" and narrations[0]["duration_ms"] >= 0
    logged = caplog.text + json.dumps(lines(caplog, "loremaster.request") + lines(caplog, "loremaster.task"))
    assert "password" not in logged.lower().replace("whisper the password", "") and "red door" not in logged


def test_a_traceback_stays_inside_its_line():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord("x", logging.ERROR, "f", 1, "failed", (), sys.exc_info())
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line and "Traceback" in json.loads(line)["exc"]
