"""What a model server says it accepts, how it counts, and the admin's
connection test.

Each kind of server names its context window on a route of its own (or, for
llama-cpp-python, only when refusing a prompt); the probes ask each in turn.
Anything a server does not say is "not verified", never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx
import openai
from django.core.exceptions import ValidationError

from . import promptspeed, slots
from .client import client_for, http_json, server_root
from .errors import POOLING_ADVICE, describe, error_text, overflow_in, upstream_detail
from .models import EndpointLease, EndpointProfile
from .replycap import ReplyTooLarge


@dataclass(frozen=True)
class ServerWindow:
    """What a server said of its context window. `tokens` is None when it
    said nothing a probe could read; only then is the window unverified."""

    tokens: int | None
    source: str
    detail: str = ""
    #: Requests the server serves at once, where it says or its kind tells.
    slots: int | None = None

    @property
    def verified(self) -> bool:
        return self.tokens is not None


#: A probe the server did not answer in time: busy or slow, not unreachable, and asked again later.
SLOW = "slow"
#: Ollama runs a model at this window unless num_ctx is set: 2,048 before
#: version 0.6, 4,096 from it.
OLLAMA_DEFAULT_WINDOW = {(0, 6): 4096, (0, 0): 2048}


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _llama_cpp(profile):
    props = http_json(profile, "GET", f"{server_root(profile)}/props")
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    n_ctx = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    n_ctx = n_ctx or _int(props.get("n_ctx"))
    if n_ctx is None:
        return None
    slots = _int(props.get("total_slots"))
    detail = f"n_ctx {n_ctx:,} per slot" + (f", {slots} slots" if slots else "")
    return ServerWindow(n_ctx, "llama.cpp /props", detail, slots=slots)


def _koboldcpp(profile):
    answer = http_json(profile, "GET", f"{server_root(profile)}/api/extra/true_max_context_length")
    value = _int(answer.get("value")) if isinstance(answer, dict) else None
    if not value:
        return None
    # KoboldCpp generates one reply at a time.
    return ServerWindow(value, "KoboldCpp /api/extra/true_max_context_length", f"max context {value:,}", slots=1)


def _listed_model(profile) -> dict | None:
    listing = http_json(profile, "GET", f"{profile.base_url.strip().rstrip('/')}/models")
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
    entry = http_json(profile, "GET", f"{server_root(profile)}/api/v0/models/{profile.chat_model}")
    if not isinstance(entry, dict):
        return None
    loaded, most = _int(entry.get("loaded_context_length")), _int(entry.get("max_context_length"))
    if loaded:
        return ServerWindow(loaded, "LM Studio /api/v0/models", f"loaded with a context of {loaded:,}")
    return ServerWindow(most, "LM Studio /api/v0/models", f"max context {most:,}") if most else None


def _ollama(profile):
    shown = http_json(profile, "POST", f"{server_root(profile)}/api/show", {"model": profile.chat_model})
    if not isinstance(shown, dict) or not ("parameters" in shown or "model_info" in shown):
        return None
    match = re.search(r"^\s*num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.MULTILINE)
    if match:
        value = int(match.group(1))
        return ServerWindow(value, "Ollama /api/show", f"num_ctx {value:,} in the model's parameters")
    info = shown.get("model_info") if isinstance(shown.get("model_info"), dict) else {}
    trained = next((_int(v) for k, v in info.items() if k.endswith(".context_length") and _int(v)), None)
    version = http_json(profile, "GET", f"{server_root(profile)}/api/version") or {}
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
    counted = http_json(profile, "POST", f"{server_root(profile)}/extras/tokenize/count", {"input": " a" * 64})
    if not isinstance(counted, dict) or not _int(counted.get("count")):
        return None
    per_piece = counted["count"] / 64
    target = profile.context_token_budget + 1
    prompt = " a" * (int(target / per_piece) + 8)
    # Read in full if it fits: waited for as long as reading that takes, in the server's one slot.
    client = client_for(profile, timeout=promptspeed.first_byte_wait(profile, target))
    try:
        with slots.held(profile, EndpointLease.Kind.PROBE):
            client.completions.create(model=profile.chat_model, prompt=prompt, max_tokens=1, stream=False)
    except openai.APIStatusError as exc:
        overflowed, window = overflow_in(error_text(exc))
        if overflowed and window:
            return ServerWindow(window, "llama-cpp-python (its refusal of a longer prompt)", f"n_ctx {window:,}", slots=1)
        return None
    except openai.APITimeoutError:
        raise  # no answer, not an answer that names nothing (probe_window)
    except (openai.OpenAIError, httpx.HTTPError):
        return None
    return ServerWindow(
        target, "llama-cpp-python (it accepted a budget-sized prompt)",
        f"the window is at least {target:,}, so the budget of {profile.context_token_budget:,} fits", slots=1,
    )


#: Tried in order; the first that recognises the server answers.
PROBES = (_llama_cpp, _koboldcpp, _vllm, _lm_studio, _ollama, _llama_cpp_python)


def probe_window(profile: EndpointProfile) -> ServerWindow:
    """Asks the server what it accepts. Anything it does not say is "not
    verified", and so is a server that could not be reached or did not
    answer in time (told apart, since a busy server's silence says nothing
    of its window: window.store_probe keeps the one it named before)."""
    try:
        for probe in PROBES:
            found = probe(profile)
            if found is not None:
                return found
    except ReplyTooLarge as exc:
        return ServerWindow(None, "reply too large", f"{exc} (not verified)")
    except ValidationError:
        return ServerWindow(None, "refused", "the endpoint allowlist does not allow the profile's address (not verified)")
    except (httpx.TimeoutException, openai.APITimeoutError) as exc:
        return ServerWindow(
            None, SLOW, f"the server is slow: it did not answer the probe in time ({type(exc).__name__}); "
                        "it is asked again later",
        )
    except (httpx.HTTPError, ValueError) as exc:
        return ServerWindow(None, "unreachable", f"the probe could not reach the server ({type(exc).__name__})")
    return ServerWindow(None, "unknown", "the server does not say what it accepts (not verified)")


def count_on_server(profile: EndpointProfile, text: str) -> int | None:
    """The server's own token count for `text` (llama.cpp's /tokenize,
    llama-cpp-python's /extras/tokenize/count), or None where it has none."""
    root = server_root(profile)
    try:
        counted = http_json(profile, "POST", f"{root}/extras/tokenize/count", {"input": text})
        if isinstance(counted, dict) and _int(counted.get("count")):
            return counted["count"]
        tokens = http_json(profile, "POST", f"{root}/tokenize", {"content": text})
        if isinstance(tokens, dict) and isinstance(tokens.get("tokens"), list):
            return len(tokens["tokens"])
    except (httpx.HTTPError, ValueError, ValidationError):
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
    #: Why the allowlist refused the profile's address (for staff: it names the host).
    refused: str = ""


def check_connection(profile: EndpointProfile, *, embedding_model: str | None = None) -> ConnectionCheck:
    """`embedding_model` is the one to try (the profile's when None; "" to
    try none)."""
    check = ConnectionCheck()
    try:
        client = client_for(profile, timeout=10.0)
    except ValidationError as exc:
        check.refused = " ".join(exc.messages)
        return check
    try:
        check.models = sorted(m.id for m in client.models.list())
    except (openai.OpenAIError, httpx.HTTPError) as exc:
        check.models_error = f"{describe(exc, profile)} The server said: {upstream_detail(exc)}"
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
        check.embedding_error = f"{describe(exc, profile, model=model)} The server said: {upstream_detail(exc)}"
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
