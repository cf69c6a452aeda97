"""Structured logs: one JSON line per request and per Celery task.

An operator of a shared instance asks "which turn was slow, which job
failed": each line carries the campaign, the action or job and the
duration. Nothing here logs a prompt, a narration or a header, so an API
key or a story never reaches the log at INFO.
"""

from __future__ import annotations

import json
import logging
import re
import time
from datetime import UTC, datetime

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

requests = logging.getLogger("loremaster.request")
tasks = logging.getLogger("loremaster.task")

#: The record attributes every LogRecord has; anything else was passed as
#: `extra` and goes into the line as a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """A log record as one line of JSON: time, level, logger, message, the
    `extra` fields, and the traceback as text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


#: Where the Django side leaves the reader's id for the request line.
READER_KEY = "loremaster.reader"


class ReaderInRequestLog:
    """Django middleware: tells the request line (written outside Django,
    by RequestLog) who the reader was, through the ASGI scope both share.
    It reads only a user the request already loaded (the session lookup
    that login_required or a view made), so it adds no query."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._acall(request)
        response = self.get_response(request)
        _tag(request)
        return response

    async def _acall(self, request):
        response = await self.get_response(request)
        _tag(request)
        return response


def _tag(request) -> None:
    scope = getattr(request, "scope", None)
    user = getattr(request, "_cached_user", None) or getattr(request, "_acached_user", None)
    if scope is not None and user is not None and user.is_authenticated:
        scope[READER_KEY] = user.pk


_IDS = re.compile(r"^/campaigns/(?P<campaign>\d+)/(?:actions/(?P<action>\d+)/)?")


class RequestLog:
    """ASGI middleware: one line per request when its response starts (a
    stream's start, not its end: a narration stream lasts as long as the
    narration), with the campaign and action its path names.

    It sits outside Django, as the body limit does, so it times the whole
    request and needs nothing of Django's sync/async adaptation.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not requests.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def logged(message) -> None:
            if message["type"] == "http.response.start":
                ids = _IDS.match(scope["path"])
                requests.info("request", extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": message["status"],
                    "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                    "reader": scope.get(READER_KEY),
                    "campaign": int(ids["campaign"]) if ids else None,
                    "action": int(ids["action"]) if ids and ids["action"] else None,
                })
            await send(message)

        await self.app(scope, receive, logged)


_task_started: dict[str, float] = {}


def task_started(task_id=None, task=None, args=None, **kwargs) -> None:
    _task_started[task_id] = time.perf_counter()


def task_finished(task_id=None, task=None, args=None, state=None, **kwargs) -> None:
    started = _task_started.pop(task_id, None)
    tasks.info("task", extra={
        "task": getattr(task, "name", None),
        "task_id": task_id,
        # The tasks take ids only (an action, a job, a profile).
        "ids": [a for a in (args or ()) if isinstance(a, int)],
        "state": state,
        "duration_ms": round((time.perf_counter() - started) * 1000, 1) if started is not None else None,
    })


def connect() -> None:
    from celery.signals import task_postrun, task_prerun

    task_prerun.connect(task_started, dispatch_uid="loremaster_task_started", weak=False)
    task_postrun.connect(task_finished, dispatch_uid="loremaster_task_finished", weak=False)
