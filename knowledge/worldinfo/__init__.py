"""The campaign's lorebooks as the World Info engine (worldinfo) reads them:
each stored entry's fields mapped onto the engine's record (`fields`), and
the campaign's books loaded once per process until the library changes,
with its compiled regex keys and the turn's regex search (`loading`)."""
