"""How much lore a reader may store: passages per source and per library,
bytes per reader, and bytes stored per byte uploaded.

Checked by the index job before its passages go live (knowledge.services.
indexing), on what would be stored (knowledge.footprint), so a file that
goes over is refused whole: its job fails with the message, which the
library and the source page show, and nothing of it is kept but the file.
The limits are settings (LOREMASTER_MAX_PASSAGES_PER_SOURCE, ..._PER_CAMPAIGN,
LOREMASTER_MAX_STORED_BYTES_PER_READER, LOREMASTER_MAX_STORED_RATIO), with
defaults that let a 100,000-passage library in.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.template.defaultfilters import filesizeformat

#: Stored bytes a file may always take, whatever its ratio: a one-line file
#: takes a row or two, many times its few bytes, and costs nothing.
RATIO_ALLOWANCE = 64 * 1024


@dataclass(frozen=True)
class LoreSize:
    """A source as it would be stored, and what its campaign and reader hold besides."""

    passages: int
    lore_bytes: int  # text, entries and passages: what the file's shape decides
    stored_bytes: int  # and the vectors
    upload_bytes: int
    campaign_passages: int  # the campaign's other sources
    reader_bytes: int  # the reader's other sources, in every campaign


def _size(n: int) -> str:
    return filesizeformat(n).replace("\xa0", " ")


def lore_refusal(size: LoreSize) -> str | None:
    """Why this source may not be stored, in the reader's words, or None."""
    kept = "Nothing from this file was stored"
    per_source = settings.LOREMASTER_MAX_PASSAGES_PER_SOURCE
    if size.passages > per_source:
        return (f"This file makes {size.passages:,} passages; a source may hold at most {per_source:,} on this "
                f"instance. Split it into smaller files. {kept}.")
    per_campaign = settings.LOREMASTER_MAX_PASSAGES_PER_CAMPAIGN
    if size.campaign_passages + size.passages > per_campaign:
        return (f"With this file's {size.passages:,} passages the library would hold "
                f"{size.campaign_passages + size.passages:,}, over this instance's limit of {per_campaign:,} "
                f"per campaign. Delete sources you no longer need, or use another campaign. {kept}.")
    ratio = settings.LOREMASTER_MAX_STORED_RATIO
    if size.lore_bytes > ratio * size.upload_bytes + RATIO_ALLOWANCE:
        return (f"Stored, this file would take {_size(size.lore_bytes)}, "
                f"{size.lore_bytes / max(1, size.upload_bytes):.0f} times its {_size(size.upload_bytes)}: "
                f"over this instance's limit of {ratio} times. Its entries or sections are too small to be "
                f"worth a passage each; join them into fewer, longer ones. {kept}.")
    per_reader = settings.LOREMASTER_MAX_STORED_BYTES_PER_READER
    if size.reader_bytes + size.stored_bytes > per_reader:
        return (f"Stored, this file would take {_size(size.stored_bytes)}, and your lore would take "
                f"{_size(size.reader_bytes + size.stored_bytes)} in all, over this instance's limit of "
                f"{_size(per_reader)} per reader. Delete sources you no longer need. {kept}.")
    return None
