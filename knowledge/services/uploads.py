"""Files into the library: each upload read as what its content is, text or
a lorebook, and stored as one source, or refused with a reason.

The content decides, not the name alone (knowledge.lorebooks.detect): a
character card saved as `.png`, a World Info file renamed `.txt` or a
NovelAI `.story` each arrive as the lorebook they are. A file named as a
lorebook that is not one is refused, naming the format, the entry and the
field at fault; a Markdown or text file whose text is not a lorebook is
imported as text, as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath

from django.conf import settings

from storyapp.models import Campaign

from ..lorebooks import Lorebook, LorebookError
from ..lorebooks import detect
from ..models import KnowledgeSource
from .lorebooks import LOREBOOK_SUFFIXES, lorebook_create, report
from .sources import (
    ALLOWED_SUFFIXES,
    DuplicateSource,
    ImportRefused,
    human_size,
    source_create,
    source_text_from_upload,
)

Source = KnowledgeSource


@dataclass
class ImportResult:
    created: list[KnowledgeSource] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    #: One line per lorebook imported: its format, entries and what was kept.
    reports: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self.duplicates + self.refused


def read_upload(*, filename: str, data: bytes) -> str | Lorebook:
    """The file's text, or the lorebook it holds, or ImportRefused."""
    name = PurePath(filename or "").name
    lowered = name.lower()
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise ImportRefused(f"{name}: the file is {human_size(len(data))}, over the {human_size(limit)} limit.")
    named_lorebook = lowered.endswith(LOREBOOK_SUFFIXES)
    try:
        book = detect.read(data, name=name, png_text_limit=settings.LOREMASTER_PNG_TEXT_MAX_BYTES)
    except LorebookError as exc:
        if named_lorebook or not lowered.endswith(ALLOWED_SUFFIXES):
            raise ImportRefused(f"{name}: {exc}. Nothing was imported from it.") from exc
        book = None  # text that happens to be JSON of no lorebook format
    if book is not None:
        return book
    if named_lorebook:
        raise ImportRefused(f"{name}: {_not_a_lorebook(lowered, data)}. Nothing was imported from it.")
    if not lowered.endswith(ALLOWED_SUFFIXES):
        raise ImportRefused(
            f"{name or 'The file'}: Loremaster imports Markdown (.md, .markdown) and plain text (.txt), "
            "and lorebooks: SillyTavern World Info and character cards (.json, .png), NovelAI "
            "(.lorebook, .story, .scenario), AI Dungeon and KoboldAI (.json)."
        )
    return source_text_from_upload(filename=name, data=data)


def _not_a_lorebook(name: str, data: bytes) -> str:
    """Why a file named as a lorebook could not be read as one."""
    if name.endswith(".png"):
        return "the file is not a PNG image (a character card is a PNG with the card inside, or JSON)"
    try:
        json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return "the file is neither JSON text nor a PNG image, so it is no lorebook format"
    except json.JSONDecodeError as exc:
        return f"the file is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    return "the file is not a lorebook"


def sources_import(
    *,
    campaign: Campaign,
    files: Iterable[tuple[str, bytes]],
    classification: str | None = None,
    visibility: str = Source.Visibility.VISIBLE,
    always_include: bool = False,
    enqueue: bool = True,
) -> ImportResult:
    """Imports each file on its own: one bad file refuses that file only.
    Without a `classification`, a lorebook is Canon and a text Reference."""
    result = ImportResult()
    for filename, data in files:
        try:
            content = read_upload(filename=filename, data=data)
            options = {"visibility": visibility, "always_include": always_include, "enqueue": enqueue}
            if isinstance(content, Lorebook):
                source = lorebook_create(
                    campaign=campaign, filename=filename, book=content, classification=classification, **options
                )
                result.reports.append(f"{source.title}: {report(content)}")
            else:
                source = source_create(
                    campaign=campaign, filename=filename, text=content,
                    classification=classification or Source.Classification.REFERENCE, **options,
                )
        except DuplicateSource as exc:
            result.duplicates.append(str(exc))
        except ImportRefused as exc:
            result.refused.append(str(exc))
        else:
            result.created.append(source)
    return result
