"""The campaign bundle, format version 1 (DESIGN.md §9): `export` writes it,
`validate` reads and checks it, `importer` stores what was checked.

Export writes one JSON document with the campaign's settings, its whole action
tree and head, its knowledge sources, its context snapshots, and its long
memory: summaries and memories, anchored to actions by the bundle's action
ids. Import reads version 1 as written there forever: unknown keys are
ignored, the long-memory keys are optional (older bundles lack them), and
anything malformed (a missing key, a wrong type, a parent, head or anchor
naming no action, a cycle) is refused with a message naming the place, before
anything is written.

Memories travel without their embeddings: a vector means something only to
the embedding model that made it, and the importing server may use another.
Imported memories are recalled by their words only: nothing re-embeds them
yet (the derived worker embeds only the memories it makes).
"""

FORMAT = "loremaster.campaign"
VERSION = 1


class BundleError(ValueError):
    """The bundle cannot be imported; the message says where and why."""
