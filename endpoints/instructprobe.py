"""Which instruct template a server's model was trained on, and why we think so.

Completions mode must render the prompt in the model's own template
(contextbuild.instruct). The servers readers run say what that is in
different places: llama.cpp (and KoboldCpp, which copies its route) in
`/props` `chat_template`, Ollama in `/api/show` `template`. Those are read
by marker strings (contextbuild.instruct.detect); a server that shows none
(llama-cpp-python, vLLM, LM Studio) is judged by its model's name, and one
whose name says nothing gets "plain" labels, the format for base models.
Asked together with the window (endpoints.window.probed), and never fails
a turn: a server that does not answer leaves the last detection standing.
"""

from __future__ import annotations

import httpx
from django.core.exceptions import ValidationError

from contextbuild import instruct

from .client import http_json, server_root
from .models import EndpointProfile
from .replycap import ReplyTooLarge


def server_chat_template(profile: EndpointProfile) -> tuple[str, str]:
    """The chat template the server shows, and the route that showed it
    ("" and "" when none does)."""
    root = server_root(profile)
    props = http_json(profile, "GET", f"{root}/props")
    if isinstance(props, dict) and isinstance(props.get("chat_template"), str) and props["chat_template"].strip():
        return props["chat_template"], "/props"
    shown = http_json(profile, "POST", f"{root}/api/show", {"model": profile.chat_model})
    if isinstance(shown, dict) and isinstance(shown.get("template"), str) and shown["template"].strip():
        return shown["template"], "Ollama /api/show"
    return "", ""


def detect(profile: EndpointProfile) -> tuple[str, str] | None:
    """(template name, why) for the profile's server, or None when it could
    not be asked (unreachable, refused by the allowlist, too large an answer)."""
    try:
        chat_template, route = server_chat_template(profile)
    except (httpx.HTTPError, ValueError, ValidationError, ReplyTooLarge):
        return None
    name, why = instruct.detect(chat_template, profile.chat_model)
    if route:
        why = f"{why} (from {route})"
    return name, why


def store_detection(profile: EndpointProfile) -> None:
    """Asks the server and keeps what it detected on the profile."""
    found = detect(profile)
    if found is None:
        return
    name, why = found
    EndpointProfile.objects.filter(pk=profile.pk).update(detected_template=name, detected_template_why=why[:300])
    profile.detected_template, profile.detected_template_why = name, why[:300]
