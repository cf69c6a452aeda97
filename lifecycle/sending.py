"""Sending a Celery task by its registered name.

The module that queues work is imported by the task that runs it (a task is
a thin wrapper around a service), so the service cannot import the task
back; it names it. Looked up in the app's registry, the task is the same
object its module defines, so eager mode and a test's stand-in `delay`
apply as to a direct call.
"""

from __future__ import annotations

from celery import current_app
from django.db import transaction


def send(task: str, *args) -> None:
    """Sends now; a broker that refuses raises, for the caller to handle."""
    current_app.tasks[task].delay(*args)


def send_on_commit(task: str, *args, robust: bool = False) -> None:
    """Sends once the transaction commits, so the worker finds the rows the
    message is about; `robust`, a refused send is logged, not raised into
    the caller's request (the row stays for the sweep to send again)."""
    transaction.on_commit(lambda: send(task, *args), robust=robust)
