"""What the next chat completion should do: scripted steps and directives.

A step comes from the test control queue or from a `[[demo:...]]` directive
in the last user message; with neither, the default narration is sent.
"""

import re
from dataclasses import dataclass

DEFAULT_CUT_AFTER = 40
DEFAULT_STALL = 5.0


@dataclass(frozen=True)
class Step:
    reply: str | None = None
    status: int | None = None
    message: str | None = None
    retry_after: float = 1
    refuse: bool = False
    cut_after: int | None = None
    stall: float = 0
    delay: float | None = None
    #: A stall mid-stream: after this many pieces, `pause` seconds of silence.
    pause_after: int | None = None
    pause: float = 0
    #: Embeddings only. `per_token`: each text gets one vector per word, as
    #: llama.cpp and llama-cpp-python send when started without pooling.
    #: `dimensions`: the vectors' width, to keep such replies small.
    #: `payload`: the whole 200 reply instead, to try malformed ones: JSON,
    #: or a string sent as it is (under a JSON content type).
    per_token: bool = False
    dimensions: int | None = None
    payload: dict | list | str | None = None
    #: Chat only: thinking sent first as `reasoning_content` deltas, as
    #: llama.cpp and DeepSeek's API send a reasoning model's.
    reasoning: str | None = None


_TYPES = {
    "reply": str,
    "status": int,
    "message": str,
    "retry_after": (int, float),
    "refuse": bool,
    "cut_after": int,
    "stall": (int, float),
    "delay": (int, float),
    "pause_after": int,
    "pause": (int, float),
    "per_token": bool,
    "dimensions": int,
    "payload": (dict, list, str),
    "reasoning": str,
}
_DIRECTIVE = re.compile(r"\[\[demo:([\w.=]+)\]\]")


def step_from_json(data: object) -> Step:
    """A step from the control API, rejected with `ValueError` if a key is
    unknown or mistyped so that a typo fails the test that made it, loudly.
    """
    if not isinstance(data, dict):
        raise ValueError("a step must be a JSON object")
    for key, value in data.items():
        expected = _TYPES.get(key)
        if expected is None:
            raise ValueError(f"unknown step key {key!r}; known: {', '.join(_TYPES)}")
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ValueError(f"step key {key!r} has the wrong type")
    if "status" in data and not 400 <= data["status"] <= 599:
        raise ValueError("status must be an HTTP error code, 400-599")
    if "dimensions" in data and data["dimensions"] < 1:
        raise ValueError("dimensions must be a positive integer")
    return Step(**data)


def step_from_directive(text: str) -> Step | None:
    """The step a `[[demo:429]]`-style directive asks for, for people trying
    failures by hand in a browser: a status code, `refuse`, `cut[=chars]` or
    `stall[=seconds]`. An unknown directive is ignored.
    """
    match = _DIRECTIVE.search(text)
    if match is None:
        return None
    name, _, value = match.group(1).partition("=")
    try:
        if name.isdigit() and 400 <= int(name) <= 599:
            return Step(status=int(name))
        if name == "refuse":
            return Step(refuse=True)
        if name == "cut":
            return Step(cut_after=int(value) if value else DEFAULT_CUT_AFTER)
        if name == "stall":
            return Step(stall=float(value) if value else DEFAULT_STALL)
    except ValueError:
        return None
    return None


def template_refusal(messages: list, refuses: set[str]) -> str:
    """The error a chat template that refuses a role raises, in its words."""
    roles = [m.get("role") for m in messages if isinstance(m, dict)]
    if "system" in refuses and "system" in roles:
        return "System role not supported"
    if "alternate" in refuses and any(a == b for a, b in zip(roles, roles[1:])):
        return "Conversation roles must alternate user/assistant/user/assistant/..."
    return ""
