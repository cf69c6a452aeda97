"""The body of a reply request: the prompt, the length, the samplers, the
thinking switch.

Kept apart from the streaming that sends it: what to ask for is decided
here, once, from the profile (its backend, template and reasoning
settings) and the turn's settings; endpoints.streaming only sends it and
reads the answer.
"""

from __future__ import annotations

import logging
import re

from contextbuild import instruct

from . import rolefolds
from . import samplers as sampler_table
from .models import EndpointProfile

log = logging.getLogger(__name__)


def build(
    profile: EndpointProfile, *, messages: list[dict], prompt_text: str, temperature: float, max_tokens: int,
    completions: bool, samplers: dict,
) -> tuple[dict, dict]:
    """The request, and the record of its samplers for the snapshot.

    The reply may run `reasoning_reserve_tokens` past the narration's
    length, so a model's thinking does not cut the visible reply short. A
    profile set not to think asks the server's chat template
    (`enable_thinking`, llama.cpp and vLLM) and, for Qwen3, the model itself
    (its `/no_think` switch in the system message). Extra stop strings join
    the template's in completions mode."""
    kind, _ = sampler_table.backend_of(profile)
    applied = sampler_table.request_for(kind, samplers, refused=profile.refused_samplers or ())
    request = {
        "model": profile.chat_model, "temperature": temperature,
        "max_tokens": max_tokens + profile.reasoning_reserve_tokens, "stream": True, **applied.fields,
    }
    extra = dict(applied.extra)
    stops = list(request.pop("stop", None) or ())
    if completions:
        request.update(prompt=prompt_text, stop=[*instruct.stop_sequences(profile.template_name), *stops])
    else:
        if stops:
            request["stop"] = stops
        if profile.thinking == EndpointProfile.Thinking.OFF:
            extra["chat_template_kwargs"] = {"enable_thinking": False}
            if "qwen3" in profile.chat_model.lower() and messages and messages[0]["role"] == "system":
                messages = [{**messages[0], "content": messages[0]["content"] + "\n\n/no_think"}, *messages[1:]]
        request["messages"] = rolefolds.folded(messages, profile.role_folds) if profile.role_folds else messages
    if extra:
        request["extra_body"] = extra
    record = {"backend": kind, "sent": applied.sent, "ignored": list(applied.ignored), "dropped": list(applied.dropped)}
    return request, record


def refolded(profile: EndpointProfile, request: dict, error: str) -> dict | None:
    """The request with its conversation folded the way a template's
    refusal asks, the fold remembered on the profile; None when the error is
    no such refusal, or the fold was already made (a second refusal is real)."""
    folds = rolefolds.refused(error) - set(profile.role_folds or ())
    if not folds or "messages" not in request:
        return None
    remembered = sorted({*(profile.role_folds or ()), *folds})
    EndpointProfile.objects.filter(pk=profile.pk).update(role_folds=remembered)
    profile.role_folds = remembered
    log.warning("%s's chat template refused the conversation (%s); folded from now on.", profile.name, ", ".join(folds))
    return {**request, "messages": rolefolds.folded(request["messages"], remembered)}


def without_refused(profile: EndpointProfile, request: dict, error: str) -> dict | None:
    """The request without the sampler fields a server's refusal names, with
    the refusal remembered on the profile so they are not sent again; None
    when the refusal names none of them."""
    extra = request.get("extra_body") or {}
    wire = set(sampler_table.backends()[sampler_table.backend_of(profile)[0]]["fields"].values())
    candidates = [name for name in (*extra, *request) if name in wire and name != "stop"]
    named = [name for name in dict.fromkeys(candidates) if re.search(rf"\b{re.escape(name)}\b", error)]
    if not named:
        return None
    refused = sorted({*(profile.refused_samplers or ()), *named})
    EndpointProfile.objects.filter(pk=profile.pk).update(refused_samplers=refused)
    profile.refused_samplers = refused
    log.warning("%s refused %s; sent without from now on.", profile.name, ", ".join(named))
    remaining = {k: v for k, v in extra.items() if k not in named}
    trimmed = {k: v for k, v in request.items() if k not in named and k != "extra_body"}
    if remaining:
        trimmed["extra_body"] = remaining
    return trimmed
