"""How a prompt's parts become what a chat endpoint reads: alternating
messages (a completions endpoint gets them in the model's instruct
template: contextbuild.instruct)."""

from __future__ import annotations

from . import rules
from .records import HistoryAction, Section

USER = "user"
ASSISTANT = "assistant"
SYSTEM = "system"


def _role(action: HistoryAction) -> str:
    return ASSISTANT if action.kind == "ai" else USER


def conversation(
    actions: tuple[HistoryAction, ...],
    turn: list[Section],
    last: Section,
    opening: Section,
) -> list[dict]:
    """The messages after the system message, alternating user and assistant.

    Chat templates that insist on alternation (Mistral's, Gemma's) refuse two
    messages of one role in a row, so consecutive actions of one role are
    joined into one message, and a history that opens with a narration (a
    campaign's opening text) is preceded by the opening cue as the reader's.
    """
    messages: list[dict] = []
    for action in actions:
        role = _role(action)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += rules.SEPARATOR + action.text
        else:
            messages.append({"role": role, "content": action.text})
    if messages and messages[0]["role"] == ASSISTANT:
        messages.insert(0, {"role": USER, "content": opening.text})
    content = rules.SEPARATOR.join(s.text for s in [*turn, last])
    if messages and messages[-1]["role"] == USER:
        messages[-1]["content"] += rules.SEPARATOR + content
    else:
        messages.append({"role": USER, "content": content})
    return messages


#: How each role is labelled when the conversation is one text (a system
#: message inside the conversation is a World Info entry placed at depth).
TURN_LABELS = {USER: "Reader", ASSISTANT: "Narrator", SYSTEM: "System"}


def render_transcript(messages) -> str:
    """The conversation as one text with turn labels ("Reader:", "Narrator:")."""
    return rules.SEPARATOR.join(f"{TURN_LABELS[m['role']]}: {m['content']}" for m in messages)
