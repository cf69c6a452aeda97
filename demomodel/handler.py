"""The HTTP side of the demo model: OpenAI's request and response shapes.

Plain responses carry a Content-Length and streams use chunked transfer
encoding, so keep-alive works for both, and a stream closed early (the `cut`
step) is an incomplete body that the client reports as a connection error
instead of a reply that merely ended.
"""

import hmac
import json
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from . import embedding, narration
from .script import Step, step_from_directive, template_refusal

CHAT_MODEL = "demo-narrator"
EMBED_MODEL = "demo-embed"

# status: (type, code, message), as OpenAI words them.
_ERRORS = {
    400: ("invalid_request_error", None, "The demo model rejected the request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    404: ("invalid_request_error", "model_not_found", "Not found."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for the demo model."),
    500: ("server_error", None, "The demo model had an internal error."),
    503: ("server_error", None, "The demo model is overloaded. Please try again later."),
}


class DemoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "LoremasterDemoModel/1.0"
    # Headers and body go out in separate writes; with Nagle's algorithm the
    # second waits for a delayed ACK, adding 40 ms to every response.
    disable_nagle_algorithm = True

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_DELETE(self):
        self._handle("DELETE")

    def handle_one_request(self):
        """A client that hangs up, mid-reply or on an idle keep-alive
        connection, is routine here (cut streams, client timeouts), not an error.
        """
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format, *args):
        if self.server.demo.log_requests:
            super().log_message(format, *args)

    def _handle(self, method: str) -> None:
        """1. Read the whole body, so the connection can be reused. 2. Check
        the key. 3. Route.
        """
        # When the request reached the server (perf_counter, comparable within
        # one process): `manage.py bench` measures turn overhead up to here.
        self.received = time.perf_counter()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        api_key = self.server.demo.api_key
        if api_key is not None and not self._authorized(api_key):
            return self._send_error(401)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return self._send_error(400, "The body is not valid JSON.")
        path = urlsplit(self.path).path.rstrip("/")
        if method == "GET" and path.startswith("/v1/models/"):
            return self._model_get(path.removeprefix("/v1/models/"))
        route = _ROUTES.get((method, path))
        if route is None:
            return self._send_error(404, f"No route for {method} {path}.")
        if method == "POST" and not isinstance(body, dict):
            return self._send_error(400, "The body must be a JSON object.")
        route(self, body)

    def _authorized(self, api_key: str) -> bool:
        given = self.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode())

    # ---------------------------------------------------------------- OpenAI API

    def _models_list(self, body: dict) -> None:
        data = [_model_entry(CHAT_MODEL), _model_entry(EMBED_MODEL)]
        self._send_json(200, {"object": "list", "data": data})

    def _model_get(self, model_id: str) -> None:
        if model_id not in (CHAT_MODEL, EMBED_MODEL):
            return self._send_error(404, f"The model '{model_id}' does not exist.")
        self._send_json(200, _model_entry(model_id))

    def _completions(self, body: dict) -> None:
        """Text completions, for profiles in completions mode: the prompt is
        narrated as a chat's last user message would be, streamed as `text`
        chunks; a reply stops where `stop` says (the reader's label)."""
        demo = self.server.demo
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            return self._send_error(400, "'prompt' must be a non-empty string.")
        limit = body.get("max_tokens")
        stream = body.get("stream") is True
        model = body.get("model") or CHAT_MODEL
        logged = {"path": "/v1/completions", "model": model, "prompt": prompt, "stream": stream,
                  "max_tokens": limit, "stop": body.get("stop"), "received": self.received}
        extra = {k: v for k, v in body.items() if k not in _CHAT_FIELDS | {"prompt", "stop"}}
        if extra:
            logged["extra"] = extra
        demo._record(logged)
        step = demo._take_step() or Step()
        if step.status is not None:
            return self._send_error(step.status, step.message, retry_after=step.retry_after)
        reply = step.reply if step.reply is not None else narration.narrate([{"role": "user", "content": prompt}])
        finish = "stop"
        # As a real server does: the reply ends before the first stop string.
        stops = [s for s in body.get("stop") or () if isinstance(s, str) and s and s in reply]
        if stops:
            reply = reply[: min(reply.index(s) for s in stops)]
        if isinstance(limit, int) and limit > 0 and narration.count_tokens(reply) > limit:
            reply, finish = narration.truncate_tokens(reply, limit), "length"
        head = {"id": f"cmpl-demo-{demo._next_id()}", "created": int(time.time()), "model": model}
        usage = _usage(narration.count_tokens(prompt), narration.count_tokens(reply))
        if not stream:
            choice = {"index": 0, "text": reply, "logprobs": None, "finish_reason": finish}
            return self._send_json(200, {**head, "object": "text_completion", "choices": [choice], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        text_chunk = {**head, "object": "text_completion"}
        for piece in narration.pieces(reply):
            choice = {"index": 0, "text": piece, "logprobs": None, "finish_reason": None}
            self._send_chunk(_event({**text_chunk, "choices": [choice]}))
        tail = _event({**text_chunk, "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage") is True:
            tail += _event({**text_chunk, "choices": [], "usage": usage})
        self._send_chunk(tail + b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _props(self, body: dict) -> None:
        n_ctx = self.server.demo.n_ctx
        if n_ctx is None:
            return self._send_error(404, "No route for GET /props.")
        props = {"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": 1}
        if self.server.demo.chat_template is not None:
            props["chat_template"] = self.server.demo.chat_template
        self._send_json(200, props)

    def _chat(self, body: dict) -> None:
        """1. Validate and log. 2. Take the scripted step, else the directive
        in the last user message, else the default narration. 3. Stall, fail,
        or answer, cut at `max_tokens` words and, if asked, mid-reply.
        """
        demo = self.server.demo
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._send_error(400, "'messages' must be a non-empty list.")
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            return self._send_error(400, "'max_tokens' must be a positive integer.")
        stream = body.get("stream") is True
        model = body.get("model") or CHAT_MODEL
        logged = {
            "path": "/v1/chat/completions",
            "model": model,
            "messages": messages,
            "stream": stream,
            "max_tokens": limit,
            "received": self.received,
        }
        # The request's other fields (samplers, chat_template_kwargs), so tests see what was asked.
        extra = {k: v for k, v in body.items() if k not in _CHAT_FIELDS}
        if extra:
            logged["extra"] = extra
        demo._record(logged)
        refusal = template_refusal(messages, demo.template_refuses)
        if refusal:
            return self._send_error(400, refusal)
        summary = narration.is_summary_request(messages)
        if summary:
            step = demo._take_summary_step() or Step()
        else:
            step = demo._take_step() or step_from_directive(narration.last_user_text(messages)) or Step()
        if step.stall and demo._stopping.wait(step.stall):
            self.close_connection = True
            return
        if step.status is not None:
            return self._send_error(step.status, step.message, retry_after=step.retry_after)
        if step.refuse:
            reply, finish = narration.REFUSAL, "content_filter"
        else:
            default = narration.summarize(messages) if summary else narration.narrate(messages, demo._next_id())
            reply = step.reply if step.reply is not None else default
            finish = "stop"
        if limit and narration.count_tokens(reply) > limit:
            reply, finish = narration.truncate_tokens(reply, limit), "length"
        usage = _usage(
            sum(narration.count_tokens(narration.message_text(m)) for m in messages if isinstance(m, dict)),
            narration.count_tokens(reply),
        )
        head = {"id": f"chatcmpl-demo-{demo._next_id()}", "created": int(time.time()), "model": model}
        if stream:
            include_usage = (body.get("stream_options") or {}).get("include_usage") is True
            return self._stream_chat(head, reply, finish, usage if include_usage else None, step)
        message = {"role": "assistant", "content": reply, "refusal": reply if step.refuse else None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        payload = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
        if step.cut_after is not None:
            return self._send_cut(json.dumps(payload).encode(), step.cut_after)
        self._send_json(200, payload)

    def _stream_chat(self, head: dict, reply: str, finish: str, usage: dict | None, step: Step) -> None:
        """Role first, then a few words per chunk, then the finish reason and
        `[DONE]`; or, for a `cut` step, the first characters and a hang-up.
        """
        demo = self.server.demo
        delay = demo.chunk_delay if step.delay is None else step.delay
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._send_chunk(_event(_chunk(head, {"role": "assistant", "content": ""})))
        for piece in narration.pieces(step.reasoning) if step.reasoning else ():
            if delay and demo._stopping.wait(delay):
                self.close_connection = True
                return
            self._send_chunk(_event(_chunk(head, {"reasoning_content": piece})))
        text = reply if step.cut_after is None else reply[: step.cut_after]
        for number, piece in enumerate(narration.pieces(text)):
            if number == step.pause_after and demo._stopping.wait(step.pause):
                self.close_connection = True
                return
            if delay and demo._stopping.wait(delay):
                self.close_connection = True
                return
            self._send_chunk(_event(_chunk(head, {"content": piece})))
        if step.cut_after is not None:
            self.close_connection = True
            return
        tail = _event(_chunk(head, {}, finish))
        if usage is not None:
            tail += _event({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        self._send_chunk(tail + b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _embeddings(self, body: dict) -> None:
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
            return self._send_error(
                400, "'input' must be a non-empty string or a list of them (the demo model takes no token arrays)."
            )
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            return self._send_error(400, "'encoding_format' must be 'float' or 'base64'.")
        dimensions = body.get("dimensions") or embedding.DIMENSIONS
        if not isinstance(dimensions, int) or dimensions < 1:
            return self._send_error(400, "'dimensions' must be a positive integer.")
        model = body.get("model") or EMBED_MODEL
        demo = self.server.demo
        demo._record({"path": "/v1/embeddings", "model": model, "input": given, "stream": False})
        step = demo._take_embedding_step() or Step()
        if step.stall and demo._stopping.wait(step.stall):
            self.close_connection = True
            return
        if step.status is not None:
            return self._send_error(step.status, step.message, retry_after=step.retry_after)
        if isinstance(step.payload, str):
            return self._send_raw(200, step.payload.encode())
        if step.payload is not None:
            return self._send_json(200, step.payload)
        dimensions = step.dimensions or dimensions
        data = []
        for index, text in enumerate(texts):
            if step.per_token:
                # A server without pooling: a list of per-token vectors, as
                # floats whatever format was asked for (llama-cpp-python's way).
                encoded = [embedding.embed(word, dimensions) for word in embedding.words(text)]
            else:
                vector = embedding.embed(text, dimensions)
                encoded = embedding.encode_base64(vector) if encoding == "base64" else vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(embedding.words(text)) for text in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self._send_json(200, {"object": "list", "data": data, "model": model, "usage": usage})

    # ------------------------------------------------------------- control API

    def _script_add(self, body: dict) -> None:
        steps = body.get("steps")
        if not isinstance(steps, list):
            return self._send_error(400, "Send {\"steps\": [...]}, with \"summaries\": true for summary requests.")
        try:
            if body.get("summaries") is True:
                self.server.demo.script_summaries(*steps)
            else:
                self.server.demo.script(*steps)
        except ValueError as error:
            return self._send_error(400, str(error))
        self._send_json(200, {"queued": self.server.demo.queued()})

    def _script_get(self, body: dict) -> None:
        self._send_json(200, {"queued": self.server.demo.queued()})

    def _script_clear(self, body: dict) -> None:
        self.server.demo.clear_script()
        self._send_json(200, {"queued": 0})

    def _requests_get(self, body: dict) -> None:
        self._send_json(200, self.server.demo.requests())

    def _requests_clear(self, body: dict) -> None:
        self.server.demo.clear_requests()
        self._send_json(200, [])

    # ---------------------------------------------------------------- writing

    def _send_json(self, status: int, payload: object, headers: dict | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), headers)

    def _send_raw(self, status: int, data: bytes, headers: dict | None = None) -> None:
        """`data` under a JSON content type, whether or not it is JSON."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str | None = None, *, retry_after: float = 1) -> None:
        kind, code, default = _ERRORS.get(status, _ERRORS[500 if status >= 500 else 400])
        error = {"message": message or default, "type": kind, "param": None, "code": code}
        headers = {"retry-after": f"{retry_after:g}"} if status == 429 else None
        self._send_json(status, {"error": error}, headers)

    def _send_cut(self, data: bytes, length: int) -> None:
        """Promise the whole body, send its first bytes, hang up."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[:length])
        self.close_connection = True

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


_ROUTES = {
    ("GET", "/v1/models"): DemoHandler._models_list,
    ("GET", "/props"): DemoHandler._props,
    ("POST", "/v1/chat/completions"): DemoHandler._chat,
    ("POST", "/v1/completions"): DemoHandler._completions,
    ("POST", "/v1/embeddings"): DemoHandler._embeddings,
    ("GET", "/_demo/script"): DemoHandler._script_get,
    ("POST", "/_demo/script"): DemoHandler._script_add,
    ("DELETE", "/_demo/script"): DemoHandler._script_clear,
    ("GET", "/_demo/requests"): DemoHandler._requests_get,
    ("DELETE", "/_demo/requests"): DemoHandler._requests_clear,
}


#: Chat request fields every client sends; the rest is logged as `extra`.
_CHAT_FIELDS = {"model", "messages", "stream", "max_tokens", "max_completion_tokens", "stream_options", "temperature"}


def _model_entry(model_id: str) -> dict:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "loremaster-demo"}


def _usage(prompt: int, completion: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunk(head: dict, delta: dict, finish: str | None = None) -> dict:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {**head, "object": "chat.completion.chunk", "choices": [choice]}


def _event(payload: dict) -> bytes:
    return b"data: %s\n\n" % json.dumps(payload).encode()
