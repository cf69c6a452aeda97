"""The demo narrator's scripted prose, and the word counting it is cut by."""

import re
from hashlib import blake2b

from contextbuild.summaries import SUMMARIZER_OPENING

DISCLAIMER = "This is a scripted demo narrator, not an AI — connect a real model at /models/."
STATE_BLOCK = '<state>{"events": []}</state>'
REFUSAL = "The demo narrator declines to continue this scene (a scripted refusal)."

_SCENES = (
    "Rain needles the cobbles as you step into the lane. Lanterns sway on "
    "their chains, and somewhere above you a shutter bangs twice, then holds "
    "its breath.",
    "The corridor smells of candle smoke and old paper. Your footsteps come "
    "back to you a moment late, as if someone a few paces behind is copying "
    "them.",
    "Wind combs the long grass flat around you. On the ridge ahead a single "
    "crooked tree leans toward the road, and a crow on its lowest branch "
    "watches you with open interest.",
    "The tavern falls quiet when you come in, then pretends it did not. A fire "
    "pops in the hearth, and the keeper wipes the same clean cup for the "
    "third time.",
    "Cold water drips from the cavern roof onto your collar. Far below, "
    "something vast turns over in its sleep, and the stones under your boots "
    "hum with it.",
)
_TURNS = (
    "You sense that your choice has been noticed.",
    "For now, nothing stands in your way.",
    "A door you had not seen before is standing open.",
    "The moment stretches, waiting for what you do next.",
)


def stable_hash(text: str) -> int:
    """A hash that is the same in every process, unlike the built-in `hash()`."""
    return int.from_bytes(blake2b(text.encode(), digest_size=8).digest(), "little")


def message_text(message: dict) -> str:
    """The text of a chat message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def last_user_text(messages: list) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message)
    return ""


def narrate(messages: list, variant: int = 0) -> str:
    """The default reply: the disclaimer first, so a reader sees it as soon as
    streaming starts and a reply cut at `max_tokens` keeps it; the state block
    last, on its own line, where the app looks for a real model's.

    `variant` lets a retry of the same prompt read differently, as a real
    model's would, so alternatives can be told apart.
    """
    seed = stable_hash(last_user_text(messages)) + variant
    scene = _SCENES[seed % len(_SCENES)]
    turn = _TURNS[(seed // len(_SCENES)) % len(_TURNS)]
    return f"{DISCLAIMER}\n\n{scene} {turn}\n{STATE_BLOCK}"


def count_tokens(text: str) -> int:
    """Words stand in for tokens: close enough for budgets in a demo."""
    return len(text.split())


def truncate_tokens(text: str, limit: int) -> str:
    """The text up to the end of its `limit`-th word (`limit` is at least 1)."""
    words = list(re.finditer(r"\S+", text))
    return text if limit >= len(words) else text[: words[limit - 1].end()]


def pieces(text: str, words_per_piece: int = 3) -> list[str]:
    """The text split into a few words at a time, whitespace kept, for streaming."""
    words = re.findall(r"\s*\S+\s*", text) or [text]
    return ["".join(words[i : i + words_per_piece]) for i in range(0, len(words), words_per_piece)]


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SPEAKER = re.compile(r"^(?:Part \d+|Narrator|[^:\n]{1,60}\(the reader\)|The reader):\s*", re.MULTILINE)


def is_summary_request(messages: list) -> bool:
    """Whether the app's summarizer is asking (its instructions open so)."""
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    return first.get("role") == "system" and message_text(first).startswith(SUMMARIZER_OPENING)


def summarize(messages: list) -> str:
    """The demo summarizer: the first sentence of every passage it was
    given, and those sentences again as facts. Extractive, so a test can
    tell exactly which actions a summary covered."""
    text = last_user_text(messages)
    firsts = []
    for block in _SPEAKER.split(text):
        block = block.strip()
        if block and not block.startswith("The passage:"):
            firsts.append(_SENTENCE.split(block, maxsplit=1)[0].strip())
    facts = "\n".join(f"- {sentence}" for sentence in firsts[:8])
    return f"Summary: {' '.join(firsts)}\nFacts:\n{facts}"
