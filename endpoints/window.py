"""What is known of a server's context window, and how it counts against ours.

Three things are kept on the profile: what the server said when probed
(asked again when the profile is saved or a turn fails against it, and kept
through a check that gets no answer), what an overflow taught (only ever
lowered), and the ratio of the server's prompt tokens to ours. The prompt
builder reads them as a `records.Window` and a ratio; derived work sizes
itself by `effective_budget`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from contextbuild import records
from contextbuild.builder import effective_budget as capped_budget

from . import instructprobe
from .models import EndpointProfile
from .probing import SLOW, ServerWindow, probe_window

#: How a kept window's note begins when the check found the server too slow to answer.
SLOW_NOTE = "The last check, too slow to answer"

#: Kept below a window the server named: our tokenizer (cl100k) undercounts
#: some models' tokens by a few percent.
LEARNED_WINDOW_MARGIN = 0.10
#: When the server refused a prompt without naming its window, the next
#: budget is this share of the one that overflowed; each refusal shrinks it.
OVERFLOW_SHRINK = 0.85


def learn_window(profile: EndpointProfile, *, told: int | None, budget: int) -> int:
    """Records what an overflow taught about the server's window: the size it
    named, or a budget smaller than the one that overflowed. Only ever
    lowers it, so the next turn (and Retry) fits. Returns the new limit."""
    limit = told if told else int(budget * OVERFLOW_SHRINK)
    current = EndpointProfile.objects.filter(pk=profile.pk).values_list("learned_window_tokens", flat=True).first()
    if current:
        limit = min(limit, current)
    EndpointProfile.objects.filter(pk=profile.pk).update(learned_window_tokens=limit)
    profile.learned_window_tokens = limit
    return limit


#: A probe the server was too slow to answer is asked again after this long.
SLOW_PROBE_AGAIN = timedelta(minutes=10)


def probed(profile: EndpointProfile, *, now: datetime | None = None) -> EndpointProfile:
    """The profile with what its server says it accepts, asking the server
    only when nothing is cached (a new or re-saved profile, or one whose
    last turn failed), or when it was too slow to answer a while ago."""
    now = now or timezone.now()
    slow = profile.probed_window_source == SLOW or profile.probe_note.startswith(SLOW_NOTE)
    if profile.probed_at is None or (slow and profile.probed_at < now - SLOW_PROBE_AGAIN):
        store_probe(profile, probe_window(profile))
        instructprobe.store_detection(profile)
    return profile


def store_probe(profile: EndpointProfile, found: ServerWindow, *, now: datetime | None = None) -> None:
    """Keeps what a probe found. A window the server named stands until the
    server says otherwise: a check that found none (it timed out on a busy
    one-slot server, could not connect, or was not answered) leaves it in
    place with a note, or the next turn would be budgeted at the profile's
    setting and overflow the window it had. Another named window replaces
    it; an overflow lowers it (`learn_window`); saving the profile clears it."""
    now = now or timezone.now()
    rows = EndpointProfile.objects.filter(pk=profile.pk)
    if found.slots is not None:
        rows.update(server_slots=found.slots)
        profile.server_slots = found.slots
    if not found.verified:
        lead = SLOW_NOTE if found.source == SLOW else "The last check"
        note = f"{lead} ({now:%Y-%m-%d %H:%M} UTC) found no window: {found.detail}"[:300]
        if rows.filter(probed_window_tokens__isnull=False).update(probe_note=note, probed_at=now):
            profile.probe_note, profile.probed_at = note, now
            return
    fields = {
        "probed_window_tokens": found.tokens, "probed_window_source": found.source[:100],
        "probed_window_detail": found.detail[:300], "probe_note": "", "probed_at": now,
    }
    rows.update(**fields)
    for name, value in fields.items():
        setattr(profile, name, value)


def forget_probe(profile: EndpointProfile) -> None:
    """Asks the server again before the next turn: it failed, or it changed."""
    EndpointProfile.objects.filter(pk=profile.pk).update(probed_at=None)
    profile.probed_at = None


def window_for(profile: EndpointProfile) -> records.Window | None:
    """What is known of the server's window: what it said when probed, and
    what an overflow taught (kept a margin below it), the smaller winning;
    None when nothing is known. A probe that found nothing is recorded as
    unverified, so the report says the window was asked for and not given."""
    known = []
    if profile.probed_window_tokens:
        detail = "; ".join(filter(None, (profile.probed_window_detail, profile.probe_note)))
        known.append(records.Window(
            verified=True, tokens=profile.probed_window_tokens, source=profile.probed_window_source, detail=detail,
        ))
    if profile.learned_window_tokens:
        learned = profile.learned_window_tokens
        known.append(records.Window(
            verified=True,
            tokens=int(learned * (1 - LEARNED_WINDOW_MARGIN)),
            source="the server's overflow error",
            detail=f"the server refused a longer prompt; its window is {learned:,} tokens, "
            f"budgeted {int(LEARNED_WINDOW_MARGIN * 100)} % below it",
        ))
    if known:
        return min(known, key=lambda w: w.tokens)
    if profile.probed_at is not None:
        return records.Window(
            verified=False, tokens=None, source=profile.probed_window_source or "unknown",
            detail=profile.probed_window_detail or "the server does not say what it accepts",
        )
    return None


def effective_budget(profile: EndpointProfile) -> int:
    """The budget a prompt really has: the profile's setting, capped by a
    verified window (as the builder caps it). Derived work sizes itself by
    this, so a summary made for an 8,192 setting never fills a 2,048 window."""
    return capped_budget(profile.context_token_budget, window_for(profile))


#: How fast the recorded ratio follows a new measurement downwards; upwards
#: it follows at once, since undercounting is what overflows a window.
RATIO_SMOOTHING = 0.3


def record_token_ratio(profile: EndpointProfile, *, ours: int, servers: int) -> float | None:
    """Stores the server's prompt tokens per one of ours, as measured on this
    turn. Returns the measured ratio (None for a count too small to tell)."""
    if ours < 50 or servers <= 0:
        return None
    measured = servers / ours
    current = EndpointProfile.objects.filter(pk=profile.pk).values_list("token_ratio", flat=True).first()
    ratio = measured if not current else max(measured, (1 - RATIO_SMOOTHING) * current + RATIO_SMOOTHING * measured)
    EndpointProfile.objects.filter(pk=profile.pk).update(token_ratio=round(ratio, 4))
    profile.token_ratio = round(ratio, 4)
    return round(measured, 4)
