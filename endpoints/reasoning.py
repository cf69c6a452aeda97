"""A reasoning model's thinking, kept apart from its narration.

Reasoning models (DeepSeek-R1 and its distills, Qwen3, QwQ) think before
they answer. Servers hand the thinking over in one of two ways: as
`reasoning_content` (or `reasoning`) deltas beside the reply (llama.cpp with
a reasoning format, vLLM, DeepSeek's API), which streaming collects on the
side, or inside the reply's text between `<think>` and `</think>`. A chat
template may open the block itself, so the reply holds only the closing tag,
after the thinking. Either way the thinking must never become story: not the
stored prose, the history, the summaries or the memories.

`split` reads a reply's text, whole or as far as it has come: what is
thinking, what is prose, and whether the reply is still (or, at its end,
was left) inside its thinking. A reply is re-read whole at every step, so a
tag cut between two chunks is read once it is complete. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPEN, CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


@dataclass(frozen=True)
class Split:
    thinking: str
    prose: str
    #: The text ends inside a thinking block (a reply cut off while thinking,
    #: or one still thinking as it streams).
    unfinished: bool = False


def split(text: str) -> Split:
    """The thinking and the prose of a reply's text.

    1. A reply that opens with `<think>` thinks until `</think>`; with no
       closing tag yet, all of it is thinking.
    2. A closing tag with no opening one before it closes a block the
       template opened: everything before it is thinking.
    3. Any later complete block is thinking too, taken out of the prose.
    A reply that is only the first letters of `<think>` so far is held
    back, so the page never shows half a tag.
    """
    stripped = text.lstrip()
    if stripped.startswith(OPEN):
        body = stripped[len(OPEN):]
        if CLOSE not in body:
            return Split(thinking=body.strip(), prose="", unfinished=True)
        thinking, _, rest = body.partition(CLOSE)
        return _with_later_blocks(thinking, rest)
    if OPEN.startswith(stripped) and stripped:
        return Split(thinking="", prose="", unfinished=False)
    before_close, closes, after = text.partition(CLOSE)
    if closes and OPEN not in before_close:
        return _with_later_blocks(before_close, after)
    return _with_later_blocks("", text)


def _with_later_blocks(thinking: str, rest: str) -> Split:
    later = _BLOCK.findall(rest)
    prose = _BLOCK.sub("", rest)
    unfinished = OPEN in prose
    if unfinished:
        prose, _, tail = prose.partition(OPEN)
        later.append(tail)
    parts = [p.strip() for p in (thinking, *later) if p.strip()]
    return Split(thinking="\n\n".join(parts), prose=prose.lstrip(), unfinished=unfinished)


def visible(text: str) -> str:
    """The reply's prose alone (for summaries and memories)."""
    return split(text).prose.strip()
