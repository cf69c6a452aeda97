"""The streamed reply: a narration or a summary, as the server writes it.

A reply counts as whole only when the server said it finished; a dropped
stream, a silence past the first-byte timeout, a reply past the total
timeout and a refusal each end in a ModelFailure worded for the reader
(errors), with the text so far kept by the caller.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import openai
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from django.core.exceptions import ValidationError

from . import promptspeed, replyrequest
from .client import client_for
from .errors import ModelFailure, describe, error_text, failure_from, overflow_from, upstream_detail
from .models import EndpointProfile
from .replycap import too_large_in

log = logging.getLogger(__name__)


@dataclass
class Meter:
    """What the server reported about one reply beside its text: its own
    count of the prompt's tokens (`usage` on the final streamed chunk), when
    it sends one, and the thinking a reasoning model sent as
    `reasoning_content` or `reasoning` deltas (endpoints.reasoning)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning: str = ""
    #: The samplers this reply was asked with, for the snapshot (replyrequest.build).
    samplers: dict = field(default_factory=dict)


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
    samplers: dict | None = None,
    prompt_tokens: int | None = None,
) -> Iterator[str]:
    """Yields the reply's text as it arrives, sampled at `temperature` and at
    most `max_tokens` long (the turn's settings: the profile's or the campaign's).

    A chat profile sends `messages`; a completions profile sends `prompt_text`
    and stops where the model would start the reader's turn. The server's
    token counts, if it sends them, land in `meter`. The wait for the first
    byte follows `prompt_tokens` (endpoints.promptspeed), and the reply
    teaches the server's reading speed.

    Raises ModelFailure for anything but a reply that ended properly: an
    error status, a dropped connection, a refusal, or a stream that stopped
    without saying it had finished (a cut-off reply must not pass as whole).
    """
    wait = promptspeed.first_byte_wait(profile, prompt_tokens)
    try:
        client = client_for(profile, timeout=wait)
    except ValidationError as exc:  # the allowlist no longer allows the profile's address
        raise failure_from(exc, profile) from exc
    completions = profile.api_mode == EndpointProfile.ApiMode.COMPLETIONS
    request, applied = replyrequest.build(
        profile, messages=messages, prompt_text=prompt_text, temperature=temperature, max_tokens=max_tokens,
        completions=completions, samplers=samplers or {},
    )
    if meter is not None:
        meter.samplers = applied
    finish_reason = None
    started = wrote = False
    room = max_tokens * REPLY_CHARS_PER_TOKEN + REPLY_CHARS_MARGIN
    opened = time.monotonic()
    deadline = opened + profile.timeout_seconds
    first_byte = timings = None
    try:
        with _open_stream(client, profile, request, completions) as stream:
            for chunk in stream:
                started = True
                first_byte = first_byte if first_byte is not None else time.monotonic() - opened
                timings = (getattr(chunk, "model_extra", None) or {}).get("timings") or timings
                if time.monotonic() > deadline:
                    raise ModelFailure(
                        f"The reply from “{profile.name}” was still coming after {profile.timeout_seconds} seconds, "
                        "the longest a reply may take. The text so far is kept; press Retry for a new narration, "
                        "or an admin can raise the total timeout on the profile."
                    )
                _read_usage(chunk, meter)
                for choice in chunk.choices:
                    text = choice.text if completions else (choice.delta.content if choice.delta else None)
                    thought = None if completions else _reasoning_of(choice.delta)
                    if thought and meter is not None:
                        meter.reasoning += thought
                        wrote = True
                        yield ""  # no prose yet, but the caller may show the thinking so far
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
                    finish_reason = choice.finish_reason or finish_reason
    except (openai.APIConnectionError, httpx.HTTPError) as exc:
        raise _dropped(exc, client, profile, request, started=started, wrote=wrote, wait=wait) from exc
    except openai.OpenAIError as exc:
        raise overflow_from(exc, profile) or failure_from(exc, profile) from exc
    _check_ending(finish_reason, client, profile, request, wrote=wrote)
    promptspeed.record(profile, prompt_tokens=prompt_tokens, first_byte_seconds=first_byte, timings=timings)


def _reasoning_of(delta) -> str | None:
    """A delta's thinking: `reasoning_content` (DeepSeek, llama.cpp) or
    `reasoning` (vLLM, OpenRouter), extra fields the client keeps as sent."""
    if delta is None:
        return None
    extra = getattr(delta, "model_extra", None) or {}
    value = extra.get("reasoning_content") or extra.get("reasoning")
    return value if isinstance(value, str) else None


def _read_usage(chunk, meter: Meter | None) -> None:
    usage = getattr(chunk, "usage", None)
    if usage is not None and meter is not None:
        meter.prompt_tokens = getattr(usage, "prompt_tokens", None)
        meter.completion_tokens = getattr(usage, "completion_tokens", None)


def _dropped(exc: Exception, client, profile: EndpointProfile, request: dict, *, started: bool, wrote: bool,
             wait: float):
    """The failure for a connection that broke, worded by how far the reply got."""
    detail = upstream_detail(exc)
    if too_large_in(exc) is not None:
        return ModelFailure(describe(exc, profile) + (" The text so far is kept." if wrote else ""), detail=detail)
    timed_out = isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException))
    if not wrote and not timed_out:
        # Some servers (llama-cpp-python) accept a stream and drop it when
        # the prompt overflows; asked again without streaming they say so.
        _raise_if_overflow(client, profile, request)
    if not started and timed_out:
        return ModelFailure(
            f"“{profile.name}” sent nothing for {wait:.0f} seconds, longer than reading this prompt should take it. "
            "Check that it is running and not overloaded, then press Retry. An admin can raise the first-byte "
            "timeout on the profile.",
            detail=detail,
        )
    if started and timed_out:
        return ModelFailure(
            f"“{profile.name}” went silent for {wait:.0f} seconds in the middle of "
            "the reply. The text so far is kept; press Retry for a new narration.",
            detail=detail,
        )
    if wrote:
        return ModelFailure(_cut_off(profile), detail=detail)
    if started:
        return ModelFailure(_ended_early(profile), detail=detail)
    return failure_from(exc, profile)


def _check_ending(finish_reason: str | None, client, profile: EndpointProfile, request: dict, *, wrote: bool) -> None:
    """Raises unless the stream said it finished, and not by a refusal."""
    if finish_reason is None and not wrote:
        _raise_if_overflow(client, profile, request)
        raise ModelFailure(_ended_early(profile))
    if finish_reason is None:
        raise ModelFailure(_cut_off(profile))
    if finish_reason == "content_filter":
        raise ModelFailure(f"The model behind “{profile.name}” refused to continue this scene (content filter).")


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


def _creator(client: openai.OpenAI, completions: bool):
    """The client's `create` for this request, posting the request as built.

    The SDK's `create` first walks the whole request through its TypedDict
    transform (aliases, NotGiven), which costs time in proportion to the
    messages: 27 ms of CPU for a 78-message prompt, most of a turn's
    overhead. The request here is plain JSON already, so it is posted through
    the same client's `post`, with the same streaming, errors and retries.
    """
    path, result, chunk = (
        ("/completions", Completion, Completion) if completions
        else ("/chat/completions", ChatCompletion, ChatCompletionChunk)
    )

    def create(*, extra_body: dict | None = None, **body):
        body = {**body, **(extra_body or {})}
        return client.post(path, body=body, cast_to=result, stream=bool(body.get("stream")), stream_cls=openai.Stream[chunk])

    return create


def _open_stream(client: openai.OpenAI, profile: EndpointProfile, request: dict, completions: bool):
    create = _creator(client, completions)
    if profile.pk in _no_stream_options:
        return create(**request)
    try:
        return create(**request, stream_options={"include_usage": True})
    except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
        text = error_text(exc)
        if "stream_options" in text:
            _no_stream_options.add(profile.pk)
            return create(**request)
        # A template that refuses a role, or a sampler the server refuses by
        # name: folded or dropped, remembered, asked again once.
        retried = replyrequest.refolded(profile, request, text) or replyrequest.without_refused(profile, request, text)
        if retried is None:
            raise
        request.clear()
        request.update(retried)
        return create(**request, stream_options={"include_usage": True})


def _raise_if_overflow(client: openai.OpenAI, profile: EndpointProfile, request: dict) -> None:
    """Asks once more without streaming and for one token; raises
    ContextOverflowAtServer if the server then names an overflow."""
    retry = client.with_options(timeout=min(30.0, float(profile.timeout_seconds)), max_retries=1)
    create = retry.completions.create if "prompt" in request else retry.chat.completions.create
    try:
        create(**{**request, "max_tokens": 1, "stream": False})
    except openai.APIStatusError as exc:
        overflow = overflow_from(exc, profile)
        if overflow is not None:
            raise overflow from exc
    except (openai.OpenAIError, httpx.HTTPError):
        return
