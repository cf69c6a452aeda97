"""Model endpoints: the bottom layer both apps call through.

Which profile a campaign uses, one client per profile, what the server says
it accepts (`probe_window`), how it counts tokens (`count_on_server`), the
streamed reply, and the wording of every failure live here, and nothing here
imports the story's modules or `knowledge` (an import-linter contract keeps
it so): narration, embeddings and retrieval all stand on it.

The reader sees the failure messages on the page, so each one names what
happened and what to do, never a stack trace or the API key.
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import openai

from contextbuild.layout import COMPLETION_STOP

from . import netguard
from .endpoints import validate_base_url
from .models import EndpointProfile

log = logging.getLogger(__name__)


def endpoint_for(campaign) -> EndpointProfile | None:
    """The campaign's profile, or the default one when it picked none."""
    if campaign.endpoint_id is not None:
        return campaign.endpoint
    return EndpointProfile.objects.filter(is_default=True).order_by("id").first()


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
                # Never follow a redirect: the allowlist checks the base URL,
                # and a 307 from an allowed server would carry the whole
                # prompt, hidden lore included, to a host it never checked.
                # The transport checks the address each connection goes to.
                http_client=openai.DefaultHttpxClient(follow_redirects=False, transport=netguard.openai_transport()),
            )
            _clients[profile.pk] = cached
    return cached[1].with_options(timeout=httpx.Timeout(seconds, connect=min(10.0, seconds)))


@atexit.register
def close_clients() -> None:
    global _probe_http
    with _clients_lock:
        for _, client in _clients.values():
            client.close()
        _clients.clear()
        if _probe_http is not None:
            _probe_http.close()
            _probe_http = None


def describe(exc: Exception, profile: EndpointProfile, *, model: str | None = None) -> str:
    """The failure in the reader's words. `model` names the model the call
    asked for, when it was not the chat model (an embedding call)."""
    # The profile's name, not its URL: readers see these messages, and an
    # internal address is the operators' business (the admin shows it).
    where = f"the model endpoint “{profile.name}”"
    kind = "embedding model" if model else "model"
    model = model or profile.chat_model
    if netguard.refusal_in(exc) is not None:
        # The address is in the operators' log (netguard), not here.
        return (
            f"The host name of {where} resolved to an address this server's endpoint allowlist does not allow, "
            "so Loremaster did not connect. An operator can list that address or range in "
            "LOREMASTER_ENDPOINT_ALLOWLIST."
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
        return f"{where} rejected the request (400): {_message(exc)}"
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
    if isinstance(exc, (openai.APIConnectionError, openai.RateLimitError, httpx.HTTPError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


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


#: The most of a server's own error text a reader is shown: enough for
#: "maximum context length is 2048 tokens", not a stack trace.
UPSTREAM_TEXT = 160


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    text = " ".join(str(error.get("message") or exc.message).split())
    return text if len(text) <= UPSTREAM_TEXT else text[: UPSTREAM_TEXT - 1] + "…"


@dataclass
class Meter:
    """What the server reported about one reply: its own count of the
    prompt's tokens (`usage` on the final streamed chunk), when it sends one."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None


#: Profiles whose server refused `stream_options` (older servers validate
#: strictly); asked without it from then on, in this process.
_no_stream_options: set[int | None] = set()


#: No reply is longer than this many characters a token asked for (the
#: longest tokens are rarely over 8), plus room for the state block: what a
#: server sends past that is not kept, so a hostile endpoint cannot store
#: megabytes into a narration that every play page then loads.
REPLY_CHARS_PER_TOKEN = 8
REPLY_CHARS_MARGIN = 2000


def stream_reply(
    profile: EndpointProfile,
    *,
    messages: list[dict],
    prompt_text: str = "",
    temperature: float,
    max_tokens: int,
    meter: Meter | None = None,
) -> Iterator[str]:
    """Yields the reply's text as it arrives, sampled at `temperature` and at
    most `max_tokens` long (the turn's settings: the profile's or the campaign's).

    A chat profile sends `messages`; a completions profile sends `prompt_text`
    and stops where the model would start the reader's turn. The server's
    token counts, if it sends them, land in `meter`.

    Raises ModelFailure for anything but a reply that ended properly: an
    error status, a dropped connection, a refusal, or a stream that stopped
    without saying it had finished (a cut-off reply must not pass as whole).
    """
    client = client_for(profile)
    completions = profile.api_mode == EndpointProfile.ApiMode.COMPLETIONS
    finish_reason = None
    started = wrote = False
    room = max_tokens * REPLY_CHARS_PER_TOKEN + REPLY_CHARS_MARGIN
    deadline = time.monotonic() + profile.timeout_seconds
    request = {"model": profile.chat_model, "temperature": temperature, "max_tokens": max_tokens, "stream": True}
    if completions:
        request.update(prompt=prompt_text, stop=list(COMPLETION_STOP))
    else:
        request.update(messages=messages)
    try:
        stream = _open_stream(client, profile, request, completions)
        with stream:
            for chunk in stream:
                started = True
                if time.monotonic() > deadline:
                    raise ModelFailure(
                        f"The reply from “{profile.name}” was still coming after {profile.timeout_seconds} seconds, "
                        "the longest a reply may take. The text so far is kept; press Retry for a new narration, "
                        "or an admin can raise the total timeout on the profile."
                    )
                usage = getattr(chunk, "usage", None)
                if usage is not None and meter is not None:
                    meter.prompt_tokens = getattr(usage, "prompt_tokens", None)
                    meter.completion_tokens = getattr(usage, "completion_tokens", None)
                for choice in chunk.choices:
                    text = choice.text if completions else (choice.delta.content if choice.delta else None)
                    if text:
                        wrote = True
                        if len(text) >= room:
                            # A server that ignores max_tokens: the reply is
                            # cut where no honest one reaches, and the stream closed.
                            log.warning("The reply from %s passed its length limit; cut.", profile.name)
                            yield text[:room]
                            return
                        room -= len(text)
                        yield text
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
    except (openai.APIConnectionError, httpx.HTTPError) as exc:
        if not wrote and not isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
            # Some servers (llama-cpp-python) accept a stream and drop it when
            # the prompt overflows; asked again without streaming they say so.
            _raise_if_overflow(client, profile, request)
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
        _raise_if_overflow(client, profile, request)
        raise ModelFailure(_ended_early(profile))
    if finish_reason is None:
        raise ModelFailure(_cut_off(profile))
    if finish_reason == "content_filter":
        raise ModelFailure(f"The model behind “{profile.name}” refused to continue this scene (content filter).")


def _open_stream(client: openai.OpenAI, profile: EndpointProfile, request: dict, completions: bool):
    create = client.completions.create if completions else client.chat.completions.create
    if profile.pk in _no_stream_options:
        return create(**request)
    try:
        return create(**request, stream_options={"include_usage": True})
    except openai.BadRequestError as exc:
        if "stream_options" not in _error_text(exc):
            raise
        _no_stream_options.add(profile.pk)
        return create(**request)


def _error_text(exc: openai.OpenAIError) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error") if isinstance(body.get("error"), dict) else body
        return f"{error.get('code') or ''} {error.get('message') or ''} {exc}"
    return str(exc)


def _raise_if_overflow(client: openai.OpenAI, profile: EndpointProfile, request: dict) -> None:
    """Asks once more without streaming and for one token; raises
    ContextOverflowAtServer if the server then names an overflow."""
    retry = client.with_options(timeout=min(30.0, float(profile.timeout_seconds)), max_retries=1)
    create = retry.completions.create if "prompt" in request else retry.chat.completions.create
    try:
        create(**{**request, "max_tokens": 1, "stream": False})
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



# ------------------------------------------------------------ what the server accepts


@dataclass(frozen=True)
class ServerWindow:
    """What a server said of its context window. `tokens` is None when it
    said nothing a probe could read; only then is the window unverified."""

    tokens: int | None
    source: str
    detail: str = ""

    @property
    def verified(self) -> bool:
        return self.tokens is not None


#: Each probe is one short request; a server that does not know the route
#: answers 404 at once, and a dead one fails the first probe's connect.
PROBE_TIMEOUT = httpx.Timeout(5.0, connect=3.0)
#: Ollama runs a model at this window unless num_ctx is set: 2,048 before
#: version 0.6, 4,096 from it.
OLLAMA_DEFAULT_WINDOW = {(0, 6): 4096, (0, 0): 2048}


def _root(profile: EndpointProfile) -> str:
    """The server's own address: the OpenAI base URL without its `/v1`."""
    base = profile.base_url.strip().rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


_probe_http: httpx.Client | None = None


def _http(profile: EndpointProfile, method: str, url: str, payload: dict | None = None, timeout=PROBE_TIMEOUT):
    """One JSON request to the profile's server; None unless it answered 200
    with JSON. Connection errors propagate: the server is not there."""
    global _probe_http
    validate_base_url(url)
    headers = {"Authorization": f"Bearer {profile.api_key}"} if profile.has_api_key else {}
    with _clients_lock:
        if _probe_http is None:
            # One pool for every probe: a new client costs an SSL context.
            _probe_http = httpx.Client(follow_redirects=False, transport=netguard.probe_transport())
    response = _probe_http.request(method, url, json=payload, headers=headers, timeout=timeout)
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _llama_cpp(profile):
    props = _http(profile, "GET", f"{_root(profile)}/props")
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    n_ctx = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    n_ctx = n_ctx or _int(props.get("n_ctx"))
    if n_ctx is None:
        return None
    slots = _int(props.get("total_slots"))
    detail = f"n_ctx {n_ctx:,} per slot" + (f", {slots} slots" if slots else "")
    return ServerWindow(n_ctx, "llama.cpp /props", detail)


def _koboldcpp(profile):
    answer = _http(profile, "GET", f"{_root(profile)}/api/extra/true_max_context_length")
    value = _int(answer.get("value")) if isinstance(answer, dict) else None
    return ServerWindow(value, "KoboldCpp /api/extra/true_max_context_length", f"max context {value:,}") if value else None


def _listed_model(profile) -> dict | None:
    listing = _http(profile, "GET", f"{profile.base_url.strip().rstrip('/')}/models")
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    return next((e for e in entries if e.get("id") == profile.chat_model), entries[0] if len(entries) == 1 else None)


def _vllm(profile):
    entry = _listed_model(profile)
    value = _int(entry.get("max_model_len")) if entry else None
    return ServerWindow(value, "vLLM /v1/models", f"max_model_len {value:,}") if value else None


def _lm_studio(profile):
    entry = _http(profile, "GET", f"{_root(profile)}/api/v0/models/{profile.chat_model}")
    if not isinstance(entry, dict):
        return None
    loaded, most = _int(entry.get("loaded_context_length")), _int(entry.get("max_context_length"))
    if loaded:
        return ServerWindow(loaded, "LM Studio /api/v0/models", f"loaded with a context of {loaded:,}")
    return ServerWindow(most, "LM Studio /api/v0/models", f"max context {most:,}") if most else None


def _ollama(profile):
    shown = _http(profile, "POST", f"{_root(profile)}/api/show", {"model": profile.chat_model})
    if not isinstance(shown, dict) or not ("parameters" in shown or "model_info" in shown):
        return None
    match = re.search(r"^\s*num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.MULTILINE)
    if match:
        value = int(match.group(1))
        return ServerWindow(value, "Ollama /api/show", f"num_ctx {value:,} in the model's parameters")
    info = shown.get("model_info") if isinstance(shown.get("model_info"), dict) else {}
    trained = next((_int(v) for k, v in info.items() if k.endswith(".context_length") and _int(v)), None)
    version = _http(profile, "GET", f"{_root(profile)}/api/version") or {}
    numbers = tuple(int(n) for n in re.findall(r"\d+", str(version.get("version", "")))[:2]) or (0, 0)
    default = next(size for since, size in OLLAMA_DEFAULT_WINDOW.items() if numbers >= since)
    value = min(default, trained) if trained else default
    return ServerWindow(
        value, "Ollama /api/show",
        f"num_ctx is not set, so Ollama {version.get('version', '')} runs the model at {default:,}"
        + (f" (trained for {trained:,})" if trained else ""),
    )


def _llama_cpp_python(profile):
    """llama-cpp-python names its window only when refusing a prompt, and it
    refuses before evaluating anything; so it is asked, once, for a prompt
    one token longer than the profile's budget. A refusal names the window;
    an answer says the budget fits."""
    counted = _http(profile, "POST", f"{_root(profile)}/extras/tokenize/count", {"input": " a" * 64})
    if not isinstance(counted, dict) or not _int(counted.get("count")):
        return None
    per_piece = counted["count"] / 64
    target = profile.context_token_budget + 1
    prompt = " a" * (int(target / per_piece) + 8)
    client = client_for(profile, timeout=float(profile.first_byte_timeout_seconds))
    try:
        client.completions.create(model=profile.chat_model, prompt=prompt, max_tokens=1, stream=False)
    except openai.APIStatusError as exc:
        overflowed, window = overflow_in(_error_text(exc))
        if overflowed and window:
            return ServerWindow(window, "llama-cpp-python (its refusal of a longer prompt)", f"n_ctx {window:,}")
        return None
    except (openai.OpenAIError, httpx.HTTPError):
        return None
    return ServerWindow(
        target, "llama-cpp-python (it accepted a budget-sized prompt)",
        f"the window is at least {target:,}, so the budget of {profile.context_token_budget:,} fits",
    )


#: Tried in order; the first that recognises the server answers.
PROBES = (_llama_cpp, _koboldcpp, _vllm, _lm_studio, _ollama, _llama_cpp_python)


def probe_window(profile: EndpointProfile) -> ServerWindow:
    """Asks the server what it accepts. Anything it does not say is "not
    verified", and so is a server that could not be reached."""
    try:
        for probe in PROBES:
            found = probe(profile)
            if found is not None:
                return found
    except (httpx.HTTPError, ValueError) as exc:
        return ServerWindow(None, "unreachable", f"the probe could not reach the server ({type(exc).__name__})")
    return ServerWindow(None, "unknown", "the server does not say what it accepts (not verified)")


def count_on_server(profile: EndpointProfile, text: str) -> int | None:
    """The server's own token count for `text` (llama.cpp's /tokenize,
    llama-cpp-python's /extras/tokenize/count), or None where it has none."""
    root = _root(profile)
    try:
        counted = _http(profile, "POST", f"{root}/extras/tokenize/count", {"input": text})
        if isinstance(counted, dict) and _int(counted.get("count")):
            return counted["count"]
        tokens = _http(profile, "POST", f"{root}/tokenize", {"content": text})
        if isinstance(tokens, dict) and isinstance(tokens.get("tokens"), list):
            return len(tokens["tokens"])
    except (httpx.HTTPError, ValueError):
        return None
    return None


# ------------------------------------------------------------ the admin's connection test


@dataclass
class ConnectionCheck:
    """What "Test connection" found, line by line, for the admin page."""

    models: list[str] = field(default_factory=list)
    models_error: str = ""
    window: ServerWindow | None = None
    embedding_width: int | None = None
    embedding_error: str = ""


def check_connection(profile: EndpointProfile, *, embedding_model: str | None = None) -> ConnectionCheck:
    """`embedding_model` is the one to try (the profile's when None; "" to
    try none)."""
    check = ConnectionCheck()
    client = client_for(profile, timeout=10.0)
    try:
        check.models = sorted(m.id for m in client.models.list())
    except (openai.OpenAIError, httpx.HTTPError) as exc:
        check.models_error = describe(exc, profile)
        return check
    check.window = probe_window(profile)
    model = (profile.embedding_model if embedding_model is None else embedding_model).strip()
    if not model:
        check.embedding_error = "No embedding model is set on this profile, so lore is searched by keywords only."
        return check
    try:
        response = client.embeddings.create(model=model, input=["The lighthouse keeper lights the lamp."])
        vector = response.data[0].embedding
    except (openai.OpenAIError, httpx.HTTPError) as exc:
        check.embedding_error = describe(exc, profile, model=model)
        if "pooling" in str(exc).lower():
            check.embedding_error += f" {POOLING_ADVICE}"
        return check
    except (IndexError, AttributeError, TypeError):
        check.embedding_error = f"The server's answer for “{model}” held no vector."
        return check
    if vector and isinstance(vector[0], list):
        check.embedding_error = (
            f"The server returned one vector per token for “{model}”, not one per text. {POOLING_ADVICE}"
        )
    elif isinstance(vector, list) and vector:
        check.embedding_width = len(vector)
    else:
        check.embedding_error = f"The server's answer for “{model}” held no vector."
    return check
