"""Model endpoints: the bottom layer the story and the library stand on.

Endpoint profiles, the allowlist and the guarded transports, the client per
profile, the streamed reply and the wording of its failures, what a server
accepts (probed and learned) and how it counts, embeddings (served or
computed here) and their calibrated floors. Nothing here imports `storyapp`
or `knowledge` (an import-linter contract keeps it so); they call down.
"""
