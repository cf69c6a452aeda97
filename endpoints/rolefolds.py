"""Chat templates that refuse a role, and the conversation they will take.

Some models' chat templates raise on a system message (Gemma's, Mistral's
older ones: "System role not supported") or on two messages of one role in
a row ("Conversation roles must alternate user/assistant/..."), and the
server answers the request with that error. The narration must not fail for
it: the refusal is recognised, the conversation is folded into a shape the
template takes (the system text into the first user turn, neighbours of one
role joined), the profile remembers the fold so later requests are sent
folded at once, and the request is asked again. Pure apart from nothing:
the remembering is endpoints.replyrequest's.
"""

from __future__ import annotations

import re

SYSTEM, ALTERNATE = "system", "alternate"
#: What servers say when a template refuses a role: llama.cpp and vLLM
#: relay the Jinja template's own exception, in words of its authors.
_REFUSALS = (
    (SYSTEM, re.compile(r"system role (is )?not supported|does not support (a )?system", re.IGNORECASE)),
    (ALTERNATE, re.compile(r"roles must alternate|must alternate user/assistant|alternating", re.IGNORECASE)),
)


def refused(error: str) -> set[str]:
    """The folds a server's error asks for ({"system"}, {"alternate"}, both or none)."""
    return {fold for fold, pattern in _REFUSALS if pattern.search(error or "")}


def folded(messages: list[dict], folds) -> list[dict]:
    """The conversation with the folds applied: system messages carried in
    the user turn after them (or before them, at the end), and consecutive
    messages of one role joined, so roles alternate from a user turn."""
    turns = [dict(m) for m in messages]
    if SYSTEM in folds:
        turns = _system_into_user(turns)
    if ALTERNATE in folds or SYSTEM in folds:
        turns = _alternating(turns)
    return turns


def _system_into_user(turns: list[dict]) -> list[dict]:
    out: list[dict] = []
    pending: list[str] = []
    for turn in turns:
        if turn["role"] == "system":
            pending.append(turn["content"])
            continue
        if turn["role"] == "user" and pending:
            turn = {**turn, "content": "\n\n".join([*pending, turn["content"]])}
            pending = []
        out.append(turn)
    if pending:
        out.append({"role": "user", "content": "\n\n".join(pending)})
    return out


def _alternating(turns: list[dict]) -> list[dict]:
    out: list[dict] = []
    for turn in turns:
        role = "user" if turn["role"] == "system" and out else turn["role"]
        if out and out[-1]["role"] == role:
            out[-1] = {**out[-1], "content": out[-1]["content"] + "\n\n" + turn["content"]}
        else:
            out.append({**turn, "role": role})
    if out and out[0]["role"] == "assistant":
        out.insert(0, {"role": "user", "content": "(The story so far.)"})
    return out
