"""Calling an OpenAI-compatible endpoint, and saying plainly what went wrong.

The reader sees the failure message on the page, so each one names what
happened and what to do, never a stack trace or the API key.
"""

from __future__ import annotations

from collections.abc import Iterator

import atexit
import re
import threading
import time

import httpx
import openai

from .endpoints import validate_base_url
from .models import EndpointProfile


class ModelFailure(Exception):
    """The endpoint did not produce a narration; the message is for the reader."""


class ContextOverflowAtServer(ModelFailure):
    """The server refused the prompt as longer than its context window;
    `window` is the size it named, when it named one."""

    def __init__(self, message: str, *, window: int | None):
        super().__init__(message)
        self.window = window


#: How servers say a prompt is too long, and where they name their window:
#: OpenAI, vLLM and llama-cpp-python ("maximum context length is 4096
#: tokens"), llama.cpp ("exceeds the available context size"; "context window
#: of 4096"), Ollama and KoboldCpp ("n_ctx", "context length").
_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context window|context size|context length|n_ctx|"
    r"too many tokens|prompt is too long",
    re.IGNORECASE,
)
_WINDOW = re.compile(
    r"(?:maximum context length is|context window of|context size \(?|n_ctx[^0-9]{0,12}|context length of)\s*(\d{3,7})",
    re.IGNORECASE,
)


def overflow_in(text: str) -> tuple[bool, int | None]:
    """Whether a server's error text says the prompt overflowed, and the window it names."""
    if not _OVERFLOW.search(text or ""):
        return False, None
    match = _WINDOW.search(text)
    return True, int(match.group(1)) if match else None


#: One client per endpoint profile per process: building one costs about
#: 25 ms (an SSL context, a connection pool), and its pool keeps the
#: connection to the model server open between turns. Replaced when the
#: profile's address or key changes; closed when the process exits.
_clients: dict[int | None, tuple[tuple, openai.OpenAI]] = {}
_clients_lock = threading.Lock()


def client_for(profile: EndpointProfile, *, timeout: float | None = None) -> openai.OpenAI:
    """The profile's client. `timeout` bounds the wait for the response's
    first byte (and any silence after it); the default is the profile's
    first-byte timeout. The total for a streamed reply is enforced by
    `stream_chat`."""
    # Checked again at call time: the allowlist may have narrowed since the
    # profile was saved.
    validate_base_url(profile.base_url)
    seconds = float(timeout if timeout is not None else profile.first_byte_timeout_seconds)
    identity = (profile.base_url, profile.api_key_encrypted)
    with _clients_lock:
        cached = _clients.get(profile.pk)
        if cached is None or cached[0] != identity:
            if cached is not None:
                cached[1].close()
            cached = identity, openai.OpenAI(
                base_url=profile.base_url, api_key=profile.api_key or "not-needed", max_retries=0,
            )
            _clients[profile.pk] = cached
    return cached[1].with_options(timeout=httpx.Timeout(seconds, connect=min(10.0, seconds)))


@atexit.register
def close_clients() -> None:
    with _clients_lock:
        for _, client in _clients.values():
            client.close()
        _clients.clear()


def describe(exc: Exception, profile: EndpointProfile) -> str:
    where = f"the model endpoint “{profile.name}” ({profile.base_url})"
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"{where} sent nothing for {profile.first_byte_timeout_seconds} seconds. Check that it is running "
            "and not overloaded, then press Retry. An admin can raise the first-byte timeout on the profile."
        )
    if isinstance(exc, openai.APIConnectionError):
        return f"Could not reach {where}. Check that the server is running, then press Retry."
    if isinstance(exc, openai.AuthenticationError):
        return f"{where} refused the API key (401). An admin can update the key on the endpoint profile."
    if isinstance(exc, openai.PermissionDeniedError):
        return f"{where} refused access to the model (403)."
    if isinstance(exc, openai.NotFoundError):
        return f"{where} does not know the model “{profile.chat_model}” (404). Check the model name."
    if isinstance(exc, openai.RateLimitError):
        return f"{where} is rate limiting requests (429). Wait a moment, then press Retry."
    if isinstance(exc, openai.BadRequestError):
        return f"{where} rejected the request (400): {_message(exc)}"
    if isinstance(exc, openai.APIStatusError):
        return f"{where} failed with an error ({exc.status_code}). Press Retry to try again."
    return f"{where} failed: {exc.__class__.__name__}. Press Retry to try again."


def _cut_off(profile: EndpointProfile) -> str:
    return (
        f"The reply from “{profile.name}” was cut off before it finished. "
        "The text so far is kept; press Retry for a new narration."
    )


def _ended_early(profile: EndpointProfile) -> str:
    return (
        f"“{profile.name}” accepted the request but ended it before writing anything. "
        "Check the model server's log; press Retry to try again."
    )


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    return str(error.get("message") or exc.message)[:300]


def stream_chat(
    profile: EndpointProfile, *, system: str, story: str, temperature: float, max_tokens: int
) -> Iterator[str]:
    """Yields the reply's text as it arrives, sampled at `temperature` and at
    most `max_tokens` long (the turn's settings: the profile's or the campaign's).

    Raises ModelFailure for anything but a reply that ended properly: an
    error status, a dropped connection, a refusal, or a stream that stopped
    without saying it had finished (a cut-off reply must not pass as whole).
    """
    client = client_for(profile)
    finish_reason = None
    started = wrote = False
    deadline = time.monotonic() + profile.timeout_seconds
    messages = [{"role": "system", "content": system}, {"role": "user", "content": story}]
    try:
        stream = client.chat.completions.create(
            model=profile.chat_model,
            messages=messages,
            temperature=temperature,
            max_tokens=max_tokens,
            stream=True,
        )
        with stream:
            for chunk in stream:
                started = True
                if time.monotonic() > deadline:
                    raise ModelFailure(
                        f"The reply from “{profile.name}” was still coming after {profile.timeout_seconds} seconds, "
                        "the longest a reply may take. The text so far is kept; press Retry for a new narration, "
                        "or an admin can raise the total timeout on the profile."
                    )
                for choice in chunk.choices:
                    if choice.delta is not None and choice.delta.content:
                        wrote = True
                        yield choice.delta.content
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
    except (openai.APIConnectionError, httpx.HTTPError) as exc:
        if not wrote and not isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
            # Some servers (llama-cpp-python) accept a stream and drop it when
            # the prompt overflows; asked again without streaming they say so.
            _raise_if_overflow(client, profile, messages)
        if started and isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
            raise ModelFailure(
                f"“{profile.name}” went silent for {profile.first_byte_timeout_seconds} seconds in the middle of "
                "the reply. The text so far is kept; press Retry for a new narration."
            ) from exc
        if wrote:
            raise ModelFailure(_cut_off(profile)) from exc
        if started:
            raise ModelFailure(_ended_early(profile)) from exc
        raise ModelFailure(describe(exc, profile)) from exc
    except openai.OpenAIError as exc:
        raise _overflow_from(exc, profile) or ModelFailure(describe(exc, profile)) from exc
    if finish_reason is None and not wrote:
        _raise_if_overflow(client, profile, messages)
        raise ModelFailure(_ended_early(profile))
    if finish_reason is None:
        raise ModelFailure(_cut_off(profile))
    if finish_reason == "content_filter":
        raise ModelFailure(f"The model behind “{profile.name}” refused to continue this scene (content filter).")


def _error_text(exc: openai.OpenAIError) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error") if isinstance(body.get("error"), dict) else body
        return f"{error.get('code') or ''} {error.get('message') or ''} {exc}"
    return str(exc)


def _raise_if_overflow(client: openai.OpenAI, profile: EndpointProfile, messages: list[dict]) -> None:
    """Asks once more without streaming and for one token; raises
    ContextOverflowAtServer if the server then names an overflow."""
    try:
        client.with_options(timeout=min(30.0, float(profile.timeout_seconds)), max_retries=1).chat.completions.create(
            model=profile.chat_model, messages=messages, max_tokens=1, stream=False,
        )
    except openai.APIStatusError as exc:
        overflow = _overflow_from(exc, profile)
        if overflow is not None:
            raise overflow from exc
    except (openai.OpenAIError, httpx.HTTPError):
        return


def _overflow_from(exc: openai.OpenAIError, profile: EndpointProfile) -> ContextOverflowAtServer | None:
    """The overflow the server's error describes, worded for the reader, or None."""
    overflowed, window = overflow_in(_error_text(exc))
    if not overflowed:
        return None
    size = f"its context window of {window:,} tokens" if window else "its context window"
    return ContextOverflowAtServer(
        f"The prompt was too long for “{profile.name}”: with its reply it did not fit {size}. "
        "Loremaster now keeps prompts shorter for this endpoint, so press Retry. To fit the model for good, "
        "an admin can lower the endpoint profile's context token budget.",
        window=window,
    )

