"""The wording of every endpoint failure, and how to tell them apart.

The reader sees these messages on the page, so each one names what happened
and what to do, never a stack trace or the API key.
"""

from __future__ import annotations

import re

import httpx
import openai
from django.core.exceptions import ValidationError

from . import netguard, replycap
from .models import EndpointProfile


class ModelFailure(Exception):
    """The endpoint did not produce a narration; the message is for the reader
    and says what kind of failure it was. `detail` is what the server itself
    said (upstream_detail), for staff and the logs only."""

    def __init__(self, message: str, *, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class ContextOverflowAtServer(ModelFailure):
    """The server refused the prompt as longer than its context window;
    `window` is the size it named, when it named one."""

    def __init__(self, message: str, *, window: int | None, detail: str = ""):
        super().__init__(message, detail=detail)
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


def describe(exc: Exception, profile: EndpointProfile, *, model: str | None = None) -> str:
    """The failure in the reader's words. `model` names the model the call
    asked for, when it was not the chat model (an embedding call)."""
    # The profile's name, not its URL: readers see these messages, and an
    # internal address is the operators' business (the admin shows it).
    where = f"the model endpoint “{profile.name}”"
    kind = "embedding model" if model else "model"
    model = model or profile.chat_model
    if isinstance(exc, ValidationError):
        # The allowlist narrowed since the profile was saved; the host it names is for staff.
        return (
            f"The address of {where} is not on this server's endpoint allowlist, so Loremaster did not connect. "
            "An operator can change the profile's address or extend LOREMASTER_ENDPOINT_ALLOWLIST."
        )
    if netguard.refusal_in(exc) is not None:
        # The address is in the operators' log (netguard), not here.
        return (
            f"The host name of {where} resolved to an address this server's endpoint allowlist does not allow, "
            "so Loremaster did not connect. An operator can list that address or range in "
            "LOREMASTER_ENDPOINT_ALLOWLIST."
        )
    too_large = replycap.too_large_in(exc)
    if too_large is not None:
        return (
            f"Loremaster stopped reading {where}: {too_large}"
            f"{'' if too_large.compressed else ', far more than any answer needs'}. "
            "Check the model server; an operator can raise LOREMASTER_MODEL_REPLY_MAX_BYTES if such replies are meant."
        )
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
        return f"{where} does not know the {kind} “{model}” (404). Check the {kind} name on the endpoint profile."
    if isinstance(exc, openai.RateLimitError):
        return f"{where} is rate limiting requests (429). Wait a moment, then press Retry."
    if isinstance(exc, openai.BadRequestError):
        return (
            f"{where} rejected the request (400). Check the model server's log or the profile's settings; "
            "staff can see the server's own message."
        )
    if isinstance(exc, openai.APIStatusError) and 300 <= exc.status_code < 400:
        return (
            f"{where} answered with a redirect ({exc.status_code}), which Loremaster never follows: a redirect "
            "could send the prompt to a host the endpoint allowlist does not allow. An admin can set the "
            "profile's base URL to the address the server redirects to."
        )
    if isinstance(exc, openai.APIStatusError):
        return f"{where} failed with an error ({exc.status_code}). Press Retry to try again."
    return f"{where} failed: {exc.__class__.__name__}. Press Retry to try again."


#: How to make llama.cpp pool token vectors into one per text. llama-server
#: takes `--pooling`; llama-cpp-python's server has no pooling setting (its
#: llama_cpp/server/settings.py), but a model metadata override sets the
#: pooling type llama.cpp otherwise reads from the GGUF file.
POOLING_ADVICE = (
    "Restart the server with pooling: llama.cpp's llama-server with `--embeddings --pooling mean`; "
    "llama-cpp-python's server, which has no pooling option, with "
    "`--embedding true --kv_overrides ARCH.pooling_type=int:1`, where ARCH is the model's architecture "
    "(general.architecture in the GGUF file, e.g. llama or qwen2)."
)


def is_temporary(exc: Exception) -> bool:
    """Whether retrying later may succeed: unreachable, a timeout, 429, 5xx."""
    if replycap.too_large_in(exc) is not None:
        return False  # the same server sends the same flood again
    if isinstance(exc, (openai.APIConnectionError, openai.RateLimitError, httpx.HTTPError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


#: The most of a server's own error text kept for staff: enough for a stack
#: trace's first lines, not a flood.
UPSTREAM_DETAIL = 1000


def upstream_detail(exc: BaseException) -> str:
    """What the server (or the connection) said of a failure, for staff and
    the logs: an HTTP status with the server's message, else the error and
    its cause. Never shown to readers: it may name internal addresses or
    echo a key."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else body
        text = f"HTTP {exc.status_code}: {error.get('message') or exc.message}"
    else:
        cause = exc.__cause__ or exc.__context__
        text = f"{type(exc).__name__}: {exc}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
    text = " ".join(text.split())
    return text if len(text) <= UPSTREAM_DETAIL else text[: UPSTREAM_DETAIL - 1] + "…"


def failure_from(exc: Exception, profile: EndpointProfile) -> ModelFailure:
    """The failure for the reader, with what the server said kept for staff."""
    return ModelFailure(describe(exc, profile), detail=upstream_detail(exc))


def error_text(exc: openai.OpenAIError) -> str:
    """The error's code and message as the server sent them, for matching."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error") if isinstance(body.get("error"), dict) else body
        return f"{error.get('code') or ''} {error.get('message') or ''} {exc}"
    return str(exc)


def overflow_from(exc: openai.OpenAIError, profile: EndpointProfile) -> ContextOverflowAtServer | None:
    """The overflow the server's error describes, worded for the reader, or None."""
    overflowed, window = overflow_in(error_text(exc))
    if not overflowed:
        return None
    size = f"its context window of {window:,} tokens" if window else "its context window"
    return ContextOverflowAtServer(
        f"The prompt was too long for “{profile.name}”: with its reply it did not fit {size}. "
        "Loremaster now keeps prompts shorter for this endpoint, so press Retry. To fit the model for good, "
        "an admin can lower the endpoint profile's context token budget.",
        window=window, detail=upstream_detail(exc),
    )
