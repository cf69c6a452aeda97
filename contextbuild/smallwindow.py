"""Small windows: the story keeps at least half of the prompt.

Played at a 2,048-token window with the default 600-token reply, the fixed
parts took most of the prompt (the narrator's rules 192 tokens, how to
report state 318) and the story kept two messages by turn 50. So at a small
window the rules come in their compact wording (rules.COMPACT_*), and the
reply reserve scales with the window: a sixth of it, never less than
MIN_REPLY, never more than configured. When the story still gets less than
half of the prompt's tokens, the inspector says so and what to change
(`advice`).
Pure.
"""

from __future__ import annotations

#: At or below this prompt budget the compact rules are used.
SMALL_WINDOW = 3072
#: The reply reserve is at most this share of the window...
REPLY_SHARE = 1 / 6
#: ...and never less than this many tokens (a scene and its state block).
MIN_REPLY = 160
#: The share of the prompt the story should keep.
STORY_SHARE = 0.5


def is_small(budget: int) -> bool:
    return budget <= SMALL_WINDOW


def reply_cap(configured: int, budget: int) -> int:
    """The reply length a window of `budget` tokens affords."""
    return min(configured, max(MIN_REPLY, int(budget * REPLY_SHARE)))


def advice(*, prompt: int, story: int, story_total: int, story_kept: int,
           reply: int, configured_reply: int, lore: int) -> str:
    """What the inspector says when the window is too small for the
    settings: the story kept less than half of the prompt while it had more
    to give. Empty when the story fits or got its share."""
    if prompt <= 0 or story_kept >= story_total or story >= prompt * STORY_SHARE:
        return ""
    steps = []
    if reply > MIN_REPLY:
        steps.append(f"a shorter longest reply (now {reply} tokens)")
    if lore:
        steps.append(f"less lore ({lore} tokens this turn: fewer always-included sources, a smaller World Info budget)")
    steps.append("a model server started with a larger window")
    capped = f", the reply capped at {reply} of the configured {configured_reply} tokens" if reply < configured_reply else ""
    return (
        f"The window is small for these settings: the story kept {story} of the prompt's {prompt} tokens "
        f"({story_kept} of {story_total} actions){capped}. To give it more: " + "; ".join(steps) + "."
    )
