"""Samplers: what a profile and a campaign set, and what each server accepts.

Local narrators rely on samplers the OpenAI API lacks (min_p, repetition
penalty, DRY, XTC) to keep a long story from looping, and every kind of
server reads them under its own names, or not at all. The table of which
backend reads which setting, and as what, is data
(endpoints/data/samplers.json), shown on the profile page as it is applied:
only what the backend accepts is sent, the OpenAI API's own fields as
fields and the rest in the body beside them; the page says which settings
this backend ignores. A server that still refuses a field (HTTP 400 or 422
naming it) has it dropped and remembered on the profile, and the turn goes
on without it (endpoints.streaming).

The backend is the admin's choice, or what the window probe recognised
(llama.cpp's /props, KoboldCpp's route, ...); a server no probe
recognised gets the OpenAI API's fields alone, which every server reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE_FILE = Path(__file__).parent / "data" / "samplers.json"
OPENAI = "openai"
#: How the window probe's source names each backend it recognised.
PROBE_SOURCES = (
    ("llama-cpp-python", "llama-cpp-python"), ("llama.cpp", "llama.cpp"), ("KoboldCpp", "koboldcpp"),
    ("vLLM", "vllm"), ("LM Studio", "lmstudio"), ("Ollama", "ollama"),
)


@cache
def table() -> dict:
    """The settings and the backends, read once per process."""
    return json.loads(TABLE_FILE.read_text(encoding="utf-8"))


def settings() -> dict[str, dict]:
    return table()["settings"]


def backends() -> dict[str, dict]:
    return table()["backends"]


def backend_of(profile) -> tuple[str, str]:
    """(backend kind, why): the admin's choice, else the probe's finding."""
    if profile.backend in backends():
        return profile.backend, "chosen on this profile"
    source = profile.probed_window_source or ""
    for prefix, kind in PROBE_SOURCES:
        if source.startswith(prefix):
            return kind, f"recognised by the window probe ({source})"
    return OPENAI, "no probe recognised the server, so only the OpenAI API's fields are sent"


def chosen(profile_values: dict | None, overrides: dict | None = None) -> dict:
    """The settings in force: the profile's, with the campaign's overrides
    on top; an empty value means "the server's default" and is left out."""
    merged = {**(profile_values or {}), **(overrides or {})}
    return {name: value for name, value in merged.items() if name in settings() and value not in (None, "", [])}


def clean(name: str, raw) -> object:
    """A setting's value from a form's text, checked against its range;
    None for empty. Raises ValueError with a reader's message."""
    spec = settings()[name]
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if spec["type"] == "strings":
        items = raw if isinstance(raw, list) else str(raw).split("\n")
        return [str(item) for item in items if str(item).strip()] or None
    try:
        value = int(str(raw).strip()) if spec["type"] == "int" else float(str(raw).strip())
    except ValueError:
        raise ValueError(f"{spec['label']} must be a {'whole ' if spec['type'] == 'int' else ''}number.") from None
    if not spec["min"] <= value <= spec["max"]:
        raise ValueError(f"{spec['label']} must be between {spec['min']} and {spec['max']}.")
    return value


@dataclass(frozen=True)
class Request:
    """What to send: OpenAI API fields, the body's other fields, and what
    was left out (the backend lacks it, or refused it before)."""

    fields: dict
    extra: dict
    ignored: tuple[str, ...]
    dropped: tuple[str, ...]

    @property
    def sent(self) -> dict:
        return {**self.fields, **self.extra}


def request_for(kind: str, values: dict, *, refused=()) -> Request:
    """The request fields for these settings on this backend."""
    wire = backends().get(kind, backends()[OPENAI])["fields"]
    openai_fields = set(table()["openai_fields"])
    fields, extra, ignored, dropped = {}, {}, [], []
    for name, value in values.items():
        if name not in wire:
            ignored.append(name)
        elif wire[name] in refused:
            dropped.append(name)
        elif wire[name] in openai_fields:
            fields[wire[name]] = value
        else:
            extra[wire[name]] = value
    return Request(fields=fields, extra=extra, ignored=tuple(ignored), dropped=tuple(dropped))


def rows(profile) -> list[dict]:
    """The profile page's table: each setting, its value here, and what this
    backend does with it."""
    kind, _ = backend_of(profile)
    wire = backends()[kind]["fields"]
    values = profile.samplers or {}
    lines = []
    for name, spec in settings().items():
        if name not in wire:
            effect = f"ignored by {backends()[kind]['label']}"
        elif wire[name] in (profile.refused_samplers or ()):
            effect = f"refused by the server once, so no longer sent (as “{wire[name]}”)"
        else:
            effect = f"sent as “{wire[name]}”"
        value = values.get(name)
        shown = ", ".join(f"“{v}”" for v in value) if isinstance(value, list) else value
        lines.append({"name": name, "label": spec["label"], "value": shown, "effect": effect})
    return lines
