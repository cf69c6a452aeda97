"""A small fantasy library and a calibrated demo model, for retrieval tests."""

from io import StringIO

from django.core.management import call_command

WESTHAVEN = """# Westhaven

## The harbour

Westhaven harbour shelters the salt fleet behind a granite breakwater. Smugglers bribe
the lantern wardens at the sea gate, and the quay is watched day and night.

## The drowned temple

Beneath the cliffs lies the drowned temple of the sea goddess. Its bronze bells ring
at low water, and pilgrims leave salt cakes on the steps.
"""

HIDDEN_KEY = """# Secrets

## The second key

Aldric hides the second vault key beneath his floorboards. Mara must not learn of it
before the last act.
"""

DRAGONS = """# Bestiary

## Copper dragons

Copper dragons nest on the high ridges of the Vale of Ash and hunt cattle at dusk.
Their shed scales are prized by armourers.
"""

SCENE = {
    "scene": {"summary": "Mara haggles with smugglers on the quay.", "location": "Westhaven harbour"},
    "entities": {"aldric": {"name": "Aldric", "aliases": ["the harbourmaster"], "status": "alive"}},
    "threads": {"seal": {"title": "Return the broken seal", "status": "open"}},
}


def calibrate(endpoint) -> None:
    call_command("calibrate_embeddings", "--model", "demo-embed", "--endpoint", endpoint.name, stdout=StringIO())
