"""The answer when the database pool had no connection to give: 503 with
Retry-After, a page saying to try again, never a bare 500.

It is the server-error handler (handler500) rather than a middleware: the
pool can run dry in the session middleware before any view, and Django turns
an exception into a response at every middleware layer, so only the handler
sees all of them. It renders without the request's context, which would ask
the database for the user.
"""

from __future__ import annotations

import sys

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import defaults
from psycopg_pool import PoolTimeout

RETRY_AFTER_SECONDS = 5
BUSY_MESSAGE = "Loremaster is busy; try again in a moment."


def is_pool_timeout(exc: BaseException | None) -> bool:
    """Whether `exc`, or what it was raised from, is a pool that had no connection."""
    while exc is not None:
        if isinstance(exc, PoolTimeout):
            return True
        if isinstance(exc, OperationalError) and "couldn't get a connection" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def busy_response() -> HttpResponse:
    response = HttpResponse(render_to_string("busy.html", {"message": BUSY_MESSAGE}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    if is_pool_timeout(sys.exc_info()[1]):
        return busy_response()
    return defaults.server_error(request)
