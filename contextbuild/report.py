"""The inspector's records of a built prompt's parts, and the overflow
message that says what the protected context spends."""

from __future__ import annotations

import math

from .records import Memory, Section, Summary, Window

#: How many of the largest protected parts an overflow message names.
OVERFLOW_PARTS = 5


def window_record(window: Window | None, *, capped: bool) -> dict:
    """What the server was found to accept, or "not checked" when nobody probed
    it, so a turn built blind is identifiable afterwards."""
    window = window or Window(verified=False, tokens=None, source="unknown", detail="not checked")
    return {
        "verified": window.verified,
        "tokens": window.tokens,
        "source": window.source,
        "model_max": window.model_max,
        "detail": window.detail,
        "capped": capped,
    }


def summary_record(summary: Summary) -> dict:
    return {
        "text": summary.text.strip(),
        "covers_through": summary.covers_through,
        "covers_actions": summary.covers_actions,
        "parts": [dict(part) for part in summary.parts],
    }


def memory_record(memory: Memory) -> dict:
    return {
        "text": memory.text.strip(),
        "authority": memory.authority,
        "score": memory.score,
        "source_action": memory.source_action,
        "id": memory.id,
        "admitted_by": memory.admitted_by,
    }


def overflow_message(
    protected: list[Section], reserved: int, output_reserve: int, budget: int, configured: int, scale: float
) -> str:
    """Names what the protected context spends and what the reader can change."""
    largest = sorted(protected, key=lambda s: s.tokens, reverse=True)[:OVERFLOW_PARTS]
    parts = ", ".join(f"{s.label} {s.tokens}" for s in largest)
    if budget < configured:
        advice = (
            f"That budget is what this server was found to accept (the setting is "
            f"{configured}), so raising the setting alone will not help: load the "
            "model with a larger window, lower the maximum reply length, or shorten "
            "the campaign's canon, instructions and persona."
        )
    else:
        advice = (
            "Raise the context budget, lower the maximum reply length, or shorten "
            "the campaign's canon, instructions and persona."
        )
    needed = math.ceil(reserved * scale) + output_reserve
    return (
        f"The protected context needs {needed} tokens "
        f"({reserved} of prompt, about {math.ceil(reserved * scale)} as the server counts them, plus "
        f"{output_reserve} reserved for the reply) but the context budget is {budget}. "
        f"Largest parts (tokens): {parts}. {advice}"
    )
