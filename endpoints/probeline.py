"""The profile page's line on the server's window, and whether the probe a
save queued is still under way.

Saving a profile forgets what was probed and queues a probe
(`EndpointProfileAdmin.save_model`); a worker's answer lands a few seconds
later. Until it does the page says it is checking and asks for the line
again (static/endpoints/window_line.js), so an admin never reads "Not asked
yet" about a server that is being asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .models import EndpointProfile

#: How long after a save its probe is still expected. A probe asks up to six
#: routes (5 s each) and llama-cpp-python for one refused prompt; past this,
#: no worker took it, and the line says when the server will be asked.
PROBE_EXPECTED_WITHIN = timedelta(seconds=90)

CHECKING = "Checking… the server is being asked what it accepts."
NOT_ASKED = "Not asked yet: the server is asked when the profile is saved and before the next turn."


@dataclass(frozen=True)
class WindowLine:
    text: str
    checking: bool = False


def window_line(profile: EndpointProfile, *, now: datetime) -> WindowLine:
    """What the server said of its window; "Checking…" while the probe
    queued by a save (less than PROBE_EXPECTED_WITHIN ago) has not answered."""
    if profile.probed_at is not None:
        if profile.probed_window_tokens:
            kept = f". {profile.probe_note}; the window above stands." if profile.probe_note else ""
            return WindowLine(
                f"{profile.probed_window_tokens:,} tokens, from {profile.probed_window_source} "
                f"({profile.probed_window_detail}){kept}"
            )
        return WindowLine(f"Not verified: {profile.probed_window_detail or profile.probed_window_source}")
    if profile.pk is not None and profile.updated is not None and now - profile.updated < PROBE_EXPECTED_WITHIN:
        return WindowLine(CHECKING, checking=True)
    return WindowLine(NOT_ASKED)
