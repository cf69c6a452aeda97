"""Which workers are alive, for pages below ops: a stream telling its reader
that no narration worker is running, a profile page saying whether a local
embedding model can run. The heartbeat rows are ops'; ops answers through
`answered_by` from its AppConfig.ready, so no lower layer imports it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Worker:
    name: str
    queues: tuple[str, ...]
    local_models: tuple[str, ...]


def this_worker() -> str:
    """This process's name, as claims and heartbeat rows record it: host:pid,
    so a restarted worker can tell its dead predecessor's claims."""
    return f"{socket.gethostname()}:{os.getpid()}"


_answer: Callable[[datetime], list[Worker]] | None = None


def answered_by(answer: Callable[[datetime], list[Worker]]) -> None:
    global _answer
    _answer = answer


def live(*, now: datetime) -> list[Worker]:
    """The workers alive at `now`; none when nothing answers (no ops app)."""
    return _answer(now) if _answer is not None else []


def serving(queue: str, *, now: datetime) -> bool:
    """Whether a live worker consumes the queue."""
    return any(queue in worker.queues for worker in live(now=now))
