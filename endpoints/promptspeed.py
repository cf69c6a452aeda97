"""How long to wait for a reply's first word: as long as the server needs
to read the prompt.

A server reads the whole prompt before it writes a word, and on a CPU a
2,000-token prompt can take a minute; a fixed first-byte timeout fails
exactly those turns (and the window probe's budget-sized prompt). So the
wait follows the prompt's size at the server's measured reading speed:
llama.cpp says it (`timings.prompt_per_second` on its last chunk), and
otherwise the time to the first byte of a long prompt tells it. A faster
measure is believed slowly and a slower one at once, since a server's
prompt cache makes some turns look faster than a full read would be. A
local server not yet measured is assumed slow. The wait is the profile's
first-byte timeout on top of the expected read, and never past its total
timeout.
"""

from __future__ import annotations

from .models import EndpointProfile
from .samplers import OPENAI, backend_of

#: Reading speed assumed for a local server not yet measured (tokens per second).
UNMEASURED_LOCAL_SPEED = 20.0
#: The wait is the profile's first-byte timeout plus this many times the expected read.
HEADROOM = 1.5
#: A first byte measured on a shorter prompt says more of the first token than of reading.
MEASURE_FROM_TOKENS = 256
#: A faster measure moves the learned speed by this share of the difference.
SPEEDUP_WEIGHT = 0.2


def first_byte_wait(profile: EndpointProfile, prompt_tokens: int | None) -> float:
    """Seconds to wait for the first byte of a reply to a prompt of this size."""
    least = float(profile.first_byte_timeout_seconds)
    speed = profile.prompt_tokens_per_second
    if speed is None and backend_of(profile)[0] != OPENAI:
        speed = UNMEASURED_LOCAL_SPEED
    if not prompt_tokens or not speed:
        return least
    return min(least + prompt_tokens / speed * HEADROOM, float(max(profile.timeout_seconds, least)))


def record(profile: EndpointProfile, *, prompt_tokens: int | None, first_byte_seconds: float | None,
           timings: dict | None = None) -> float | None:
    """Learns the server's reading speed from one reply; returns it."""
    measured = None
    if isinstance(timings, dict) and isinstance(timings.get("prompt_per_second"), (int, float)):
        if (timings.get("prompt_n") or 0) >= MEASURE_FROM_TOKENS:
            measured = float(timings["prompt_per_second"])
    elif prompt_tokens and prompt_tokens >= MEASURE_FROM_TOKENS and first_byte_seconds and first_byte_seconds > 0:
        measured = prompt_tokens / first_byte_seconds
    if not measured or measured <= 0:
        return profile.prompt_tokens_per_second
    known = profile.prompt_tokens_per_second
    speed = measured if known is None or measured < known else known + (measured - known) * SPEEDUP_WEIGHT
    EndpointProfile.objects.filter(pk=profile.pk).update(prompt_tokens_per_second=speed)
    profile.prompt_tokens_per_second = speed
    return speed
