"""Files into the library: each upload stored as it came, to be read by
its index job, or refused at once for what the request can tell.

The web request does no parsing (issue 23: a 100,000-entry book held a
web thread for minutes): it checks the size and the name, stores the file
on a new source and queues its job, which reads it in a worker
(knowledge.services.parsing) and reports there. `sources_import` reads the
files in the calling process, for a command that waits for them anyway.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath

from django.conf import settings

from storyapp.models import Campaign

from .. import footprint
from ..lorebooks import Lorebook
from ..models import KnowledgeSource
from .books import report
from .lorebooks import lorebook_create
from .reading import (
    ALLOWED_SUFFIXES,
    LOREBOOK_SUFFIXES,
    DuplicateSource,
    ImportRefused,
    human_size,
    UNREAD_SUFFIX,
    read_upload,
    source_always_include_check,
)
from .sources import source_create, source_store

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
    options = {"visibility": visibility, "always_include": always_include, "enqueue": enqueue}

    def store(filename: str, data: bytes) -> KnowledgeSource:
        content = read_upload(filename=filename, data=data)
        if isinstance(content, Lorebook):
            source = lorebook_create(
                campaign=campaign, filename=filename, book=content, classification=classification, **options
            )
            result.reports.append(f"{source.title}: {report(content)}")
            return source
        return source_create(
            campaign=campaign, filename=filename, text=content,
            classification=classification or Source.Classification.REFERENCE, **options,
        )

    return _each_on_its_own(files, store, result)


def sources_upload(
    *,
    campaign: Campaign,
    files: Iterable[tuple[str, bytes]],
    classification: str | None = None,
    visibility: str = Source.Visibility.VISIBLE,
    always_include: bool = False,
) -> ImportResult:
    """Stores each file as it came on a new source and queues its job, one
    bad file refusing that file only. The report comes with the job."""
    def store(filename: str, data: bytes) -> KnowledgeSource:
        return source_upload(campaign=campaign, filename=filename, data=data, classification=classification,
                             visibility=visibility, always_include=always_include)

    return _each_on_its_own(files, store, ImportResult())


def _each_on_its_own(files: Iterable[tuple[str, bytes]], store, result: ImportResult) -> ImportResult:
    """`store` called on each file, its refusal recorded against that file only."""
    for filename, data in files:
        try:
            source = store(filename, data)
        except DuplicateSource as exc:
            result.duplicates.append(str(exc))
        except ImportRefused as exc:
            result.refused.append(str(exc))
        else:
            result.created.append(source)
    return result


def source_upload(
    *, campaign: Campaign, filename: str, data: bytes, classification: str | None, visibility: str,
    always_include: bool,
) -> KnowledgeSource:
    """One file stored, unread, with its index job queued; ImportRefused for
    what the request can tell: the size, the name, an empty file, always
    include outside Canon, the same bytes already in the library. Without a
    `classification`, the job gives a lorebook Canon and a text Reference."""
    name = PurePath(filename or "").name
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise ImportRefused(f"{name}: the file is {human_size(len(data))}, over the {human_size(limit)} limit.")
    if not name.lower().endswith(ALLOWED_SUFFIXES + LOREBOOK_SUFFIXES):
        raise ImportRefused(UNREAD_SUFFIX.format(name=name or "The file"))
    if not data.strip():
        raise ImportRefused(f"{name}: the file is empty.")
    if classification:
        source_always_include_check(classification=classification, always_include=always_include)
    return source_store(
        campaign=campaign, filename=name, content="", title=PurePath(name).stem or name, enqueue=True,
        digest=hashlib.sha256(data).hexdigest(), upload=data, upload_bytes=len(data),
        stored_bytes=footprint.ROW_BYTES + len(data), visibility=visibility,
        classification=classification or Source.Classification.REFERENCE,
        always_include=always_include and bool(classification),
        metadata={"upload": {"classification": classification or "", "always_include": always_include}},
    )

