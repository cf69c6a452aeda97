"""Structured logs: one JSON line per request and per Celery task.

An operator of a shared instance asks "whose turn was slow, which job
failed": each line carries the reader, the campaign, the job and the
duration. Nothing here logs a prompt, a narration or a header, so an API
key or a story never reaches the log at INFO.
"""

from __future__ import annotations

import json
import logging
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


def _fields(request, response, started: float) -> dict:
    match = getattr(request, "resolver_match", None)
    kwargs = match.kwargs if match is not None else {}
    user = getattr(request, "user", None)
    return {
        "method": request.method,
        "path": request.path,
        "status": getattr(response, "status_code", None),
        "duration_ms": round((time.perf_counter() - started) * 1000, 1),
        "reader": user.pk if user is not None and user.is_authenticated else None,
        "campaign": kwargs.get("pk"),
        "action": kwargs.get("action_id"),
        "view": match.view_name if match is not None else None,
    }


class RequestLogMiddleware:
    """Logs each request once its response is ready (a stream's start, not
    its end: a narration stream lasts as long as the narration)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._async(request)
        started = time.perf_counter()
        response = self.get_response(request)
        requests.info("request", extra=_fields(request, response, started))
        return response

    async def _async(self, request):
        started = time.perf_counter()
        response = await self.get_response(request)
        requests.info("request", extra=_fields(request, response, started))
        return response


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
