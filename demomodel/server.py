"""The demo model server's lifecycle and its scripted state."""

import copy
import itertools
import socket
import socketserver
import threading
from collections import deque
from http.server import ThreadingHTTPServer

from .handler import DemoHandler
from .script import Step, step_from_json


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], demo: "DemoModelServer"):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.demo = demo
        super().__init__(address, DemoHandler)

    def server_bind(self):
        """Skip `HTTPServer`'s reverse DNS lookup of the host, which can take
        seconds on a machine without DNS and buys nothing here.
        """
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class DemoModelServer:
    """A scripted OpenAI-compatible server: `start()` it on a background
    thread (tests), or `serve_forever()` in the foreground (the command).

    Port 0 picks a free port. With `api_key`, every request must carry it as a
    bearer token. `chunk_delay` is the pause between streamed chunks, so that
    streaming shows in a browser; tests set it to 0.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        chunk_delay: float = 0.03,
        log_requests: bool = False,
        n_ctx: int | None = None,
    ):
        #: The window `/props` reports, as llama.cpp's server does; None
        #: answers 404 there, as most servers do.
        self.n_ctx = n_ctx
        #: The chat template `/props` shows (llama.cpp's `chat_template`), if any.
        self.chat_template: str | None = None
        #: What the chat template raises on, as Gemma's does: "system" (a
        #: system message), "alternate" (two messages of one role in a row).
        self.template_refuses: set[str] = set()
        self.host = host
        self.api_key = api_key
        self.chunk_delay = chunk_delay
        self.log_requests = log_requests
        self._port = port
        self._lock = threading.Lock()
        self._steps: deque[Step] = deque()
        self._embedding_steps: deque[Step] = deque()
        self._summary_steps: deque[Step] = deque()
        self._requests: list[dict] = []
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the demo model server is not listening")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def listen(self) -> None:
        """Bind and listen, so `port` is known before serving starts; once."""
        if self._httpd is None:
            self._stopping.clear()
            self._httpd = _HTTPServer((self.host, self._port), self)

    def start(self) -> "DemoModelServer":
        """Listen, then serve on a daemon thread; returns once connectable.
        Starting a started server does nothing."""
        if self._thread is not None:
            return self
        self.listen()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted, then close."""
        self.listen()
        try:
            self._httpd.serve_forever(poll_interval=0.05)
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop accepting, wake any stalled or slow reply so its thread ends
        promptly, and close the listening socket.
        """
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        if self._httpd is not None:
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "DemoModelServer":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # ------------------------------------------- test control, in process

    def script(self, *steps: dict) -> None:
        """Queue steps for the next chat completions, one each, in order."""
        parsed = [step_from_json(step) for step in steps]
        with self._lock:
            self._steps.extend(parsed)

    def queued(self) -> int:
        with self._lock:
            return len(self._steps)

    def script_embeddings(self, *steps: dict) -> None:
        """Queue steps for the next embedding requests, one each, in order.
        Only `status`, `message`, `retry_after`, `stall`, `per_token`,
        `dimensions` and `payload` apply there."""
        parsed = [step_from_json(step) for step in steps]
        with self._lock:
            self._embedding_steps.extend(parsed)

    def script_summaries(self, *steps: dict) -> None:
        """Queue steps for the next summary requests (told apart by the
        summarizer's opening), so scripting narrations is never disturbed
        by a summary that a turn scheduled."""
        parsed = [step_from_json(step) for step in steps]
        with self._lock:
            self._summary_steps.extend(parsed)

    def clear_script(self) -> None:
        with self._lock:
            self._steps.clear()
            self._embedding_steps.clear()
            self._summary_steps.clear()

    def requests(self) -> list[dict]:
        """The chat and embedding requests received so far, oldest first."""
        with self._lock:
            return copy.deepcopy(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def reset(self) -> None:
        self.chat_template = None
        self.template_refuses = set()
        self.clear_script()
        self.clear_requests()

    # ------------------------------------------------ for the handler

    def _take_step(self) -> Step | None:
        with self._lock:
            return self._steps.popleft() if self._steps else None

    def _take_summary_step(self) -> Step | None:
        with self._lock:
            return self._summary_steps.popleft() if self._summary_steps else None

    def _take_embedding_step(self) -> Step | None:
        with self._lock:
            return self._embedding_steps.popleft() if self._embedding_steps else None

    def _record(self, entry: dict) -> None:
        with self._lock:
            self._requests.append(entry)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)
